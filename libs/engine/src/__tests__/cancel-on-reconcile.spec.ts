/**
 * The `cancel_on` reconcile (issue 8): a cancel event whose live match was lost between its commit
 * and its announce (the node died right after the commit) still cancels the runs it matches: a
 * scheduler pass matches again every logged event of a name some live run has a spec
 * for, once it is `RECONCILE_SETTLE_MS` old, in log order from a cursor kept in the store: it never
 * skips an event, under sustained load or across a restart, and an event cancels only runs created
 * by its time plus the replay window. On SQLite and PostgreSQL.
 */
import { RECONCILE_SETTLE_MS } from '@ironflow/engine';
import { StoreClock } from '@ironflow/store';
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

  /** Runs for orders `ids` (admitted), then the node dies and a cancel event for each is logged with its live match lost. */
  const lostCancels = async (ids: string[]) => {
    const runs: string[] = [];
    for (const orderId of ids) runs.push((await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId } })).runIds[0]);
    await t.engine.resources.followUps.drain(5000);
    crashing.crash();
    for (const orderId of ids) await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId } });
    return runs;
  };
  const statuses = async (runIds: string[]) => Promise.all(runIds.map(async (id) => (await readRun(t, id)).status));
  const lag = async () => (await t.engine.resources.metrics.cancelOnReconcileLag.get()).values[0].value;

  it('under sustained load it never skips ahead: a backlog larger than a pass reads, older than the replay window, is matched over the next passes, with the lag on a gauge and in a warning', async () => {
    t.engine.resources.config.passPageSize = 2;
    const warned: string[] = [];
    t.engine.resources.logger = { ...t.engine.resources.logger, warn: (message) => void warned.push(message) };
    expect(await t.engine.cancelOn.reconcile(1)).toBe(0); // its cursor starts at the replay window
    const runs = await lostCancels(['A', 'B', 'C', 'D', 'E']);
    // The pass falls behind past the replay window before it reads any of them.
    t.db.clock.advance(t.engine.resources.config.cancelOnReplayWindowMs + RECONCILE_SETTLE_MS + 1);
    expect(await t.engine.cancelOn.reconcile(1)).toBe(2);
    expect(await lag()).toBeGreaterThan(30);
    expect(warned).toContain('cancel_on reconcile is behind the event log; its next pass goes on from its cursor');
    expect(await t.engine.cancelOn.reconcile(1)).toBe(2);
    expect(await t.engine.cancelOn.reconcile(1)).toBe(1);
    expect(await lag()).toBe(0);
    expect(await statuses(runs)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled', 'cancelled']);
  });

  it('a restarted scheduler goes on from the stored cursor, however long it was down, and matches no event twice', async () => {
    t.engine.resources.config.passPageSize = 2;
    expect(await t.engine.cancelOn.reconcile(1)).toBe(0);
    const runs = await lostCancels(['A', 'B', 'C']);
    t.db.clock.advance(RECONCILE_SETTLE_MS + 1);
    expect(await t.engine.cancelOn.reconcile(1)).toBe(2);
    // The log is read in (time, id) order; the three events share a time.
    expect((await statuses(runs)).sort()).toEqual(['cancelled', 'cancelled', 'waiting_for_capacity']);
    // A fresh node on the same store, started well past the replay window.
    const fresh = await t.restart();
    (fresh.resources.clock as StoreClock).advance(RECONCILE_SETTLE_MS + 1 + 5 * fresh.resources.config.cancelOnReplayWindowMs);
    fresh.resources.config.passPageSize = 2;
    expect(await fresh.cancelOn.reconcile(1)).toBe(1);
    expect(await statuses(runs)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(await fresh.cancelOn.reconcile(1)).toBe(0);
  });

  it('a late-read event cancels no run created after its time plus the replay window', async () => {
    expect(await t.engine.cancelOn.reconcile()).toBe(0);
    await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'X' } });
    t.db.clock.advance(t.engine.resources.config.cancelOnReplayWindowMs + 1);
    const { runIds: [runX] } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'X' } });
    await t.engine.resources.followUps.drain(5000);
    expect((await readRun(t, runX)).status).toBe('waiting_for_capacity');
    t.db.clock.advance(RECONCILE_SETTLE_MS + 1);
    expect(await t.engine.cancelOn.reconcile()).toBe(0);
    expect((await readRun(t, runX)).status).toBe('waiting_for_capacity');
  });
});
