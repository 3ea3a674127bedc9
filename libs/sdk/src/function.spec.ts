import { createFunction } from './function';

const handler = async () => 1;

describe('createFunction', () => {
  it('refuses, by name, a key of the config or of its debounce that registration would drop', () => {
    const config = { id: 'orders', retries: 3, record: true, debounce: { periodMs: 1000, maxWait: 5000 } };
    expect(() => createFunction(config as never, handler)).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR', message: 'function "orders": unknown option(s), not options of this SDK: retries, record, debounce.maxWait' }),
    );
  });

  it.each([
    [{ retry: 5 }, 'retry: an object, e.g. {maxAttempts: 5} (got 5)'],
    [{ retry: null }, 'retry: an object, e.g. {maxAttempts: 5} (got null)'],
    [{ concurrency: 2 }, 'concurrency: an object, e.g. {limit: 2} (got 2)'],
    [{ debounce: '5s' }, 'debounce: an object, e.g. {periodMs: 5000} (got "5s")'],
    [{ metadata: ['a'] }, 'metadata: an object, e.g. {team: "payments"} (got ["a"])'],
    [{ triggers: 'order.placed' }, 'triggers: a list of objects, e.g. [{event: "order.placed"}] (got "order.placed")'],
    [{ triggers: ['order.placed'] }, 'triggers.0: an object, e.g. [{event: "order.placed"}] (got "order.placed")'],
    [{ cancelOn: [{ event: 'a' }, 'b'] }, 'cancelOn.1: an object, e.g. [{event: "order.cancelled", match: "data.orderId"}] (got "b")'],
    [{ secrets: 'TOKEN' }, 'secrets: a list of secret names, e.g. ["STRIPE_KEY"] (got "TOKEN")'],
  ])('refuses an option of another shape, %j, which registration would send as {} (the defaults, in silence)', (extra, message) => {
    expect(() => createFunction({ id: 'orders', ...extra } as never, handler)).toThrow(expect.objectContaining({ code: 'VALIDATION_ERROR', message: `function "orders": ${message}` }));
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
