import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { countRows, registerPull } from './engine-kit.test';

/**
 * "A repeated idempotency key starts nothing and answers with the first event's runs"
 * (trigger-system.ts). Sequentially on both stores; concurrently on PostgreSQL, where the
 * triggers' transactions overlap.
 */
describe.each(STORES)('trigger idempotency [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
  });
  afterEach(() => t.close());

  it('a repeated idempotency key answers duplicate, with the first event and its runs, and writes nothing', async () => {
    const first = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { n: 1 }, idempotencyKey: 'order-1' });
    const again = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { n: 2 }, idempotencyKey: 'order-1' });
    expect(first).toEqual({ eventId: expect.any(String), runIds: [expect.any(String)], debouncedFunctionIds: [], duplicate: false });
    expect(again).toEqual({ ...first, duplicate: true });
    expect(await countRows(t, 'events')).toBe(1);
    expect(await countRows(t, 'runs')).toBe(1);
    // A new key is no duplicate (on PostgreSQL the one-statement trigger, the event's functions now known).
    const other = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { n: 3 }, idempotencyKey: 'order-2' });
    expect(other).toEqual({ eventId: expect.any(String), runIds: [expect.any(String)], debouncedFunctionIds: [], duplicate: false });
    expect(other.eventId).not.toBe(first.eventId);
    expect(await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {}, idempotencyKey: 'order-2' })).toEqual({ ...other, duplicate: true });
  });

  if (dialect === 'postgres') {
    it('concurrent triggers with one idempotency key all answer with the one event and its runs', async () => {
      // The race is not forced by a pause point (trigger has none), so several rounds make it
      // near-certain that transactions overlap.
      for (let round = 0; round < 5; round++) {
        const key = `order-${round}`;
        const settled = await Promise.allSettled(
          Array.from({ length: 10 }, (_v, i) => t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { n: i }, idempotencyKey: key })),
        );
        expect(await countRows(t, 'events')).toBe(round + 1);
        expect(await countRows(t, 'runs')).toBe(round + 1);
        // Regression: with a check-then-insert in events.ts `insertEvent`, some rejected with a raw
        // `QueryFailedError: duplicate key value violates unique constraint "events_idempotency"`.
        const answers = settled.map((s) => (s.status === 'fulfilled' ? s.value : `rejected: ${String(s.reason).slice(0, 120)}`));
        const winner = answers.find((a) => typeof a !== 'string' && !a.duplicate);
        if (winner === undefined || typeof winner === 'string') throw new Error(`no trigger of round ${round} stored the event: ${JSON.stringify(answers)}`);
        expect(answers).toEqual(answers.map((a) => (a === winner ? winner : { ...winner, duplicate: true })));
      }
    });
  }
});
