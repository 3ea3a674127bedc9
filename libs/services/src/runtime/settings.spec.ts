import { loadSettings } from './settings';

describe('loadSettings: IRONFLOW_CLUSTER_ID', () => {
  it('defaults to the ironflow deployment', () => {
    expect(loadSettings({}).clusterId).toBe('ironflow');
  });

  it('takes a release-name-like id', () => {
    expect(loadSettings({ IRONFLOW_CLUSTER_ID: 'prod-eu_1' }).clusterId).toBe('prod-eu_1');
  });

  it('refuses at start an id that cannot stand in a NATS subject or stream name, naming the variable', () => {
    for (const bad of ['a.b', 'a*', '>', 'has space', 'x'.repeat(64)]) {
      expect(() => loadSettings({ IRONFLOW_CLUSTER_ID: bad })).toThrow(/IRONFLOW_CLUSTER_ID/);
    }
  });
});
