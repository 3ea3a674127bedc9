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

  it('a repeated idempotency key answers with the first event and its runs and writes nothing', async () => {
    const first = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { n: 1 }, idempotencyKey: 'order-1' });
    const again = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { n: 2 }, idempotencyKey: 'order-1' });
    expect(again).toEqual(first);
    expect(first.runIds).toHaveLength(1);
    expect(await countRows(t, 'events')).toBe(1);
    expect(await countRows(t, 'runs')).toBe(1);
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
        const winner = answers.find((a) => typeof a !== 'string');
        expect(winner).toBeDefined();
        expect(answers).toEqual(Array(10).fill(winner));
      }
    });
  }
});
