/**
 * The `cancel_on` reconcile (issue 8): a cancel event whose live match was lost between its commit
 * and its announce (the node died right after the commit) still cancels the runs it matches: a
 * scheduler pass matches again every logged event of a name some live run has a spec
 * for, in the replay window, once it is `RECONCILE_SETTLE_MS` old. On SQLite and PostgreSQL.
 */
import { RECONCILE_SETTLE_MS } from '@ironflow/engine';
import { CrashingFollowUpTracker, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { readRun } from './engine-kit.test';

describe.each(STORES)('cancel_on reconcile [%s]', (dialect) => {
  let t: TestEngine;
  let crashing: CrashingFollowUpTracker;

  beforeEach(async () => {
    crashing = new CrashingFollowUpTracker();
    t = await openTestEngine(dialect, {}, { followUps: crashing });
    await t.engine.api.registerFunction(t.scope, { id: 'order', mode: 'pull', triggers: [{ event: 'order.placed' }], cancelOn: [{ event: 'order.cancelled', match: 'data.orderId' }] });
  });
  afterEach(() => t.close());

  it('a cancel whose live match was lost is matched again by the scheduler reconcile pass: the matching run only, once', async () => {
    const { runIds: [runA] } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'A' } });
    const { runIds: [runB] } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'B' } });
    crashing.crash(); // the node dies right after the cancel event's commit: its live match never runs
    const { eventId } = await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'A' } });
    expect(crashing.dropped).toContain('cancel-on-match');
    expect((await readRun(t, runA)).status).toBe('waiting_for_capacity');

    // The scheduler pass runs from the store, not from anything the lost follow-up held in memory.
    const node = t.engine;
    expect(await node.cancelOn.reconcile()).toBe(0); // not settled yet: a live match may still be running
    t.db.clock.advance(RECONCILE_SETTLE_MS + 1);
    expect(await node.cancelOn.reconcile()).toBe(1);
    expect(await readRun(t, runA)).toMatchObject({ status: 'cancelled', error: { code: 'CANCELLED', message: `cancel_on: order.cancelled ${eventId}` } });
    expect((await readRun(t, runB)).status).toBe('waiting_for_capacity');
    expect(await node.cancelOn.reconcile()).toBe(0);
  });
});
