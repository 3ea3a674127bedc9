import { FunctionDefinition } from '@ironflow/contracts';
import { laneFields } from './concurrency';

const definition = (key?: string): FunctionDefinition =>
  ({ id: 'fn', name: 'fn', mode: 'pull', triggers: [], retry: { maxAttempts: 3, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300000 }, timeoutMs: 600000, cancelOn: [], concurrency: { limit: 2, ...(key ? { key } : {}) } }) as FunctionDefinition;

describe('laneFields', () => {
  // The same three spellings debounce.key takes: a bare key read only the shared lane before.
  it.each(['customerId', 'data.customerId', 'event.data.customerId'])('key %s reads the run input\'s customerId', (key) => {
    expect(laneFields(definition(key), { customerId: 'c1' })).toEqual({ concurrencyKey: 'c1', concurrencyLimit: 2 });
  });

  it('a key that reads nothing is the shared lane; a non-string value is its JSON; no key is the shared lane', () => {
    expect(laneFields(definition('customerId'), { other: 1 })).toEqual({ concurrencyKey: null, concurrencyLimit: 2 });
    expect(laneFields(definition('data.tier'), { tier: { level: 3 } })).toEqual({ concurrencyKey: '{"level":3}', concurrencyLimit: 2 });
    expect(laneFields(definition(), { customerId: 'c1' })).toEqual({ concurrencyKey: null, concurrencyLimit: 2 });
  });
});
