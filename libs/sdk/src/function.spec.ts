import { createFunction } from './function';

const handler = async () => 1;

describe('createFunction', () => {
  it('refuses, by name, a key of the config or of its debounce that registration would drop', () => {
    const config = { id: 'orders', retries: 3, record: true, debounce: { periodMs: 1000, maxWait: 5000 } };
    expect(() => createFunction(config as never, handler)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'function "orders": unknown option(s), not options of this SDK: retries, record, debounce.maxWait' }),
    );
  });

  it('takes every FunctionConfig key', () => {
    const fn = createFunction(
      {
        id: 'orders', name: 'Orders', description: 'd', triggers: [{ event: 'order.placed' }], retry: { maxAttempts: 2 }, timeoutMs: 1000, stepTimeoutMs: 500,
        concurrency: { limit: 1 }, cancelOn: [{ event: 'order.cancelled', match: 'data.id' }], debounce: { periodMs: 1000, key: 'id', maxWaitMs: 2000 },
        mode: 'pull', metadata: { team: 'a' }, secrets: ['TOKEN'], recording: true,
      },
      handler,
    );
    expect(fn.config.debounce).toEqual({ periodMs: 1000, key: 'id', maxWaitMs: 2000 });
  });
});
