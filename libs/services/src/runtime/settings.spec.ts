import { loadSettings } from './settings';

describe('settings: IRONFLOW_SIGNING_KEY', () => {
  it('is unset by default and taken as given when valid', () => {
    expect(loadSettings({}).signingKey).toBeUndefined();
    expect(loadSettings({ IRONFLOW_SIGNING_KEY: '' }).signingKey).toBeUndefined();
    expect(loadSettings({ IRONFLOW_SIGNING_KEY: 'k'.repeat(16) }).signingKey).toBe('k'.repeat(16));
  });

  it.each([
    ['shorter than 16 characters', 'short-key', 'at least 16 characters'],
    ['ending in a newline (read from a file)', `${'k'.repeat(20)}\n`, 'whitespace'],
    ['starting with a space', ` ${'k'.repeat(20)}`, 'whitespace'],
  ])('stops the process when %s, naming the variable', (_case, value, reason) => {
    expect(() => loadSettings({ IRONFLOW_SIGNING_KEY: value })).toThrow(/IRONFLOW_SIGNING_KEY/);
    expect(() => loadSettings({ IRONFLOW_SIGNING_KEY: value })).toThrow(reason);
  });
});
