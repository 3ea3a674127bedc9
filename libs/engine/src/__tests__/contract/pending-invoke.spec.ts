import { Engine, EngineConfig } from '@ironflow/engine';
import { FollowUpTracker } from '@ironflow/follow-up';
import { runsSql } from '@ironflow/store';
import { CrashingFollowUpTracker, STORES, TestEngine, auditOf, faultsOf, waitFor } from '@ironflow/testing';
import {
  cancelledUnclaimed,
  dispatchedUnclaimed,
  drainFollowUps,
  emitCancel,
  expectHeldWhileRowHeld,
  history,
  holdAudit,
  invocation,
  openAdmissionTest,
  reportInvoke,
  takeAllSlots,
} from './admission-kit';
import { auditRows, pollOne, readRun, readStep } from './post-commit-kit';

/**
 * Pending invocations (specification, the accepted `step.invoke` report's order of effects, "An
 * invoked child replays cancel_on and is read again before it is dispatched", the slot rules of
 * admission effects): a report commits the held child and its pending invocation; its follow-up
 * admits the child; the pending-invocation pass (run with the waiting-run pass) finishes an
 * admission a crash, a store error or a full slot set left. On SQLite and PostgreSQL, real NATS.
 */
describe.each(STORES)('pending invocations [%s]', (dialect) => {
  let t: TestEngine;
  let crashing: CrashingFollowUpTracker;

  beforeEach(async () => {
    crashing = new CrashingFollowUpTracker();
    t = await openAdmissionTest(dialect, crashing);
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await t.close();
  });

  const drain = (engine: Engine = t.engine) => drainFollowUps(engine);

  /** The report commits, then the node dies: nothing after the commit runs. A fresh engine shares only the store. */
  async function crashAfterReport(orderId: string, options: { async?: boolean } = {}) {
    crashing.crash();
    const reported = await reportInvoke(t, orderId, options);
    expect(crashing.dropped).toContain('invoke-admission');
    await t.engine.stop(1000);
    expect(await readRun(t, reported.childId)).toMatchObject({ status: 'waiting_for_capacity', held: true });
    return reported;
  }

  /** An engine on the same store with `extra` config (a restart after the crash). */
  function restarted(extra: Partial<EngineConfig> = {}): Promise<Engine> {
    return t.restart({ bus: 'nats', config: extra });
  }

  describe.each([false, true])('TestPendingInvoke_CrashAfterReportIsRecovered', (async) => {
    it(`TestPendingInvoke_CrashAfterReportIsRecovered: ${async ? 'fire-and-forget' : 'sync'} invoke: the pass admits the child${async ? ' and resumes the parent' : ''}, once`, async () => {
      const { parentId, childId, stepId } = await crashAfterReport('A', { async });
      const fresh = await restarted();
      expect(await fresh.pendingInvokes.run()).toBe(1);
      await drain(fresh);

      expect(await dispatchedUnclaimed(t, childId)).toBe(true);
      expect(await readRun(t, parentId)).toMatchObject({ status: async ? 'waiting_for_capacity' : 'waiting' });
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: async ? 'completed' : 'waiting', childRunId: childId });
      expect((await invocation(t, parentId, stepId))?.settledAt).not.toBeNull();
      // The rows of the lost follow-up are gone; the pass writes the child's run.created row.
      expect(await auditRows(t, childId, 'run.created')).toBe(1);
      // A second pass finds nothing pending and changes nothing.
      const before = await readRun(t, childId);
      expect(await fresh.pendingInvokes.run()).toBe(0);
      await drain(fresh);
      expect(await readRun(t, childId)).toEqual(before);
      expect(await auditRows(t, childId, 'run.created')).toBe(1);
      const job = await pollOne(fresh, childId);
      expect(job.event).toMatchObject({ name: 'ironflow/function.invoked', data: { orderId: 'A' } });
    });
  });

  it('TestWaitingYieldRecovery_BlockedCreatedRowDoesNotHoldDispatch: a recovered child\'s run.created row goes before its dispatch; a stuck audit table holds the pass for a bounded time and the dispatch not at all', async () => {
    const { parentId, childId, stepId } = await crashAfterReport('A');
    const fresh = await restarted();
    const hold = holdAudit(fresh);
    // The pass starts the admission off its loop and returns; the admission writes the row first.
    expect(await fresh.pendingInvokes.run()).toBe(1);
    await hold.reached();
    // It waits for the row at most createdRowWaitMs, then replays and dispatches with the row still stuck.
    await waitFor('the child dispatched with its row stuck', () => dispatchedUnclaimed(t, childId));
    expect(auditOf(fresh).waiting).toBeGreaterThan(0);
    expect(await auditRows(t, childId, 'run.created')).toBe(0);
    hold.release();
    await drain(fresh);
    const rows = await history(t, childId);
    expect(rows[0]).toMatchObject({ eventType: 'run.created', ts: (await readRun(t, childId))!.createdAt });
    expect((await invocation(t, parentId, stepId))?.settledAt).not.toBeNull();
  });

  it('TestPendingInvoke_NoSlotLeavesAdmissionToThePass: with no slot free the rows land, the child is not dispatched nor the parent resumed; the next pass does both', async () => {
    t.engine.resources.config.admissionSlotWaitMs = 200;
    const releaseSlots = await takeAllSlots(t.engine);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A', { async: true });
    await drain();
    expect(await auditRows(t, childId, 'run.created')).toBe(1);
    expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
    expect(await invocation(t, parentId, stepId)).toMatchObject({ settledAt: null, createdRow: true });

    releaseSlots();
    expect(await t.engine.pendingInvokes.run()).toBe(1);
    await drain();
    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    // The pass does not write the row its admission already wrote.
    expect(await auditRows(t, childId, 'run.created')).toBe(1);
  });

  it('TestPendingInvoke_RunCreatedPrecedesReplayedCancel: the pass writes the child\'s run.created row, waits for it, then the replay cancels the child; the row sorts first', async () => {
    const eventId = await emitCancel(t, 'A'); // no run matches yet: the cancel waits in the replay buffer
    const { parentId, childId, stepId } = await crashAfterReport('A');
    const rowWaitMs = 10_000;
    const fresh = await restarted({ createdRowWaitMs: rowWaitMs });
    const audit = holdAudit(fresh);
    expect(await fresh.pendingInvokes.run()).toBe(1);
    await audit.reached();
    await expectHeldWhileRowHeld(t, childId, rowWaitMs);
    const releasedAt = t.db.clock.now();
    audit.release();
    await drain(fresh);

    const child = await readRun(t, childId);
    expect(child).toMatchObject({ status: 'cancelled', executionSeq: 0, error: { message: `cancel_on: order.cancelled ${eventId}` } });
    expect(child!.endedAt!).toBeGreaterThanOrEqual(releasedAt);
    const rows = await history(t, childId);
    expect(rows.map((r) => r.eventType)).toEqual(['run.created', 'run.cancelled']);
    expect(rows[0].id).toBeLessThan(rows[1].id);
    expect(rows[1].cause).toBe('cancel-on-event');
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
  });

  it('TestPostCommit_BlockedAuditDoesNotStallInvokeRecovery: a page of pending children does not hold the pass behind a stuck audit table; each dispatch follows its row; a stopping pass does not cost the rows', async () => {
    crashing.crash();
    const reported = [];
    for (const orderId of ['A', 'B', 'C']) reported.push(await reportInvoke(t, orderId));
    await t.engine.stop(1000);
    const fresh = await restarted({ createdRowWaitMs: 10_000 });
    const audit = holdAudit(fresh);
    const pass = new AbortController();
    // The pass starts every admission and returns with the audit table still stuck.
    expect(await fresh.pendingInvokes.run(pass.signal)).toBe(3);
    await audit.reached();
    pass.abort();
    for (const { childId } of reported) expect(await readRun(t, childId)).toMatchObject({ held: true });
    audit.release();
    await drain(fresh);
    for (const { childId } of reported) {
      expect(await auditRows(t, childId, 'run.created')).toBe(1);
      expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    }
  });

  it('TestPostCommit_InvokeRecoveryRowOutlivesThePass: the pass ends and the engine stops with a recovered child\'s row stuck; the row lands and the child is dispatched', async () => {
    const { childId } = await crashAfterReport('A');
    const fresh = await restarted({ createdRowWaitMs: 10_000 });
    const audit = holdAudit(fresh);
    const pass = new AbortController();
    expect(await fresh.pendingInvokes.run(pass.signal)).toBe(1);
    await audit.reached();
    pass.abort();
    const stopping = fresh.stop(10_000);
    audit.release();
    await stopping;
    expect(await auditRows(t, childId, 'run.created')).toBe(1);
    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
  });

  describe.each(['report', 'pass'] as const)('TestPendingInvoke_ReadFailureAfterCommitKeepsEffects', (path) => {
    it(`TestPendingInvoke_ReadFailureAfterCommitKeepsEffects: on the ${path}, a failed child read after the commit costs neither the row nor the replay`, async () => {
      await emitCancel(t, 'A');
      let engine = t.engine;
      let reported;
      if (path === 'report') {
        t.faults.afterCommit((name) => name === 'applyReport', () => t.faults.fail({ unit: (name) => name === 'admitRun' }));
        reported = await reportInvoke(t, 'A');
      } else {
        reported = await crashAfterReport('A');
        engine = await restarted();
        faultsOf(engine).fail({ unit: (name) => name === 'admitRun' });
        expect(await engine.pendingInvokes.run()).toBe(1);
      }
      await drain(engine);
      const { parentId, childId, stepId } = reported;
      expect(faultsOf(engine).failures.some((f) => f.includes('admitRun'))).toBe(true);
      expect(await auditRows(t, childId, 'run.created')).toBe(1);
      expect(await cancelledUnclaimed(t, childId)).toBe(true);
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
      // The failed read left the invocation pending; a later pass settles it and writes no second row.
      faultsOf(engine).heal();
      expect(await engine.pendingInvokes.run()).toBe(1);
      await drain(engine);
      expect((await invocation(t, parentId, stepId))?.settledAt).not.toBeNull();
      expect(await auditRows(t, childId, 'run.created')).toBe(1);
    });
  });

  /** The report's admission did not run: the node died (`crash`), or its replay failed and it stopped (`restart`). */
  async function admissionLeftBehind(how: 'crash' | 'restart', orderId: string) {
    if (how === 'crash') return crashAfterReport(orderId);
    t.faults.fail({ unit: (name) => name === 'cancelOnReplayLog' });
    const reported = await reportInvoke(t, orderId);
    await drain();
    expect(await readRun(t, reported.childId)).toMatchObject({ status: 'waiting_for_capacity', held: true });
    await t.engine.stop(1000);
    return reported;
  }

  describe.each(['crash', 'restart'] as const)('TestPendingInvoke_RecoveryDispatchReplaysCancel', (how) => {
    it(`TestPendingInvoke_RecoveryDispatchReplaysCancel: after a ${how}, the pass cancels the child from the event log before dispatching it, with its rows stuck`, async () => {
      const eventId = await emitCancel(t, 'A');
      const { parentId, childId, stepId } = await admissionLeftBehind(how, 'A');
      const fresh = await restarted({ createdRowWaitMs: 100 });
      const audit = holdAudit(fresh);
      expect(await fresh.pendingInvokes.run()).toBe(1);
      await waitFor('the child cancelled', () => cancelledUnclaimed(t, childId));
      expect(await readRun(t, childId)).toMatchObject({ error: { message: `cancel_on: order.cancelled ${eventId}` } });
      await waitFor('the parent woken', async () => (await readStep(t, parentId, stepId))?.status === 'failed' || undefined);
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
      audit.release();
      await drain(fresh);
    });
  });

  describe.each(['crash', 'restart'] as const)('TestPendingInvoke_RetriedYieldReplaysCancel', (how) => {
    it(`TestPendingInvoke_RetriedYieldReplaysCancel: after a ${how}, a retried invoke report finds its child created and cancels it from the event log before dispatching it`, async () => {
      const eventId = await emitCancel(t, 'A');
      const reported = await admissionLeftBehind(how, 'A');
      const fresh = await restarted();
      const audit = holdAudit(fresh);
      const again = await reported.resend(fresh);
      expect(again).toMatchObject({ effect: 'none' });
      await waitFor('the child cancelled', () => cancelledUnclaimed(t, reported.childId));
      expect(await readRun(t, reported.childId)).toMatchObject({ error: { message: `cancel_on: order.cancelled ${eventId}` } });
      await waitFor('the parent woken', async () => (await readStep(t, reported.parentId, reported.stepId))?.status === 'failed' || undefined);
      audit.release();
      await drain(fresh);
      expect((await invocation(t, reported.parentId, reported.stepId))?.settledAt).not.toBeNull();
    });
  });

  describe.each(['open', 'closed'] as const)('TestPostCommit_InvokeFollowUpOutlivesStop', (store) => {
    it(`TestPostCommit_InvokeFollowUpOutlivesStop: an admission that outlasts Engine.stop finishes with the store ${store}${store === 'open' ? ', and its work lands' : ', logs its error, and the next start recovers it'}`, async () => {
      // A tracker of our own, so the test sees what a follow-up logs.
      await t.close();
      const warnings: string[] = [];
      const tracker = new FollowUpTracker({ warn: (message) => warnings.push(message) });
      t = await openAdmissionTest(dialect, tracker);
      t.engine.resources.config.admissionSlotWaitMs = 15_000;
      const logged = jest.spyOn(t.engine.resources.logger, 'warn');
      const releaseSlots = await takeAllSlots(t.engine);
      const { parentId, childId } = await reportInvoke(t, 'A', { async: true });
      await t.engine.stop(100); // the drain gives up: the admission is still waiting for a slot
      expect(t.engine.resources.followUps.size).toBeGreaterThan(0);
      if (store === 'closed') await t.db.store.close();
      releaseSlots();
      if (store === 'open') {
        await waitFor('the child dispatched', () => dispatchedUnclaimed(t, childId));
        await waitFor('the parent resumed', async () => (await readRun(t, parentId))?.status === 'waiting_for_capacity' || undefined);
        return;
      }
      await waitFor('the admission ended', () => t.engine.resources.followUps.size === 0 || undefined);
      expect(logged.mock.calls.map((c) => c[0])).toContain('admission stopped before its dispatch; the pass tries again');
      // The next start (a store opened again) recovers it.
      const next = await t.restart({ bus: 'nats' });
      const read = (id: string) => next.resources.store.read('test', (tx) => runsSql.getRun(tx, id));
      expect(await read(childId)).toMatchObject({ status: 'waiting_for_capacity', held: true });
      expect(await next.pendingInvokes.run()).toBe(1);
      await drain(next);
      expect(await read(childId)).toMatchObject({ status: 'waiting_for_capacity', held: false, executionSeq: 0 });
      expect(await read(parentId)).toMatchObject({ status: 'waiting_for_capacity' });
      // Shutdown warned that a follow-up outlived it; the follow-up itself ended without throwing.
      expect(warnings).toContain('follow-ups still running after the drain deadline');
      expect(warnings.filter((w) => w.startsWith('follow-up '))).toEqual([]);
    });
  });
});

/**
 * The replay's read of the event log goes up to the store's clock, not this process's (specification,
 * "The replay reads the 30 s buffer and then the event log up to the database's clock"). PostgreSQL,
 * with the database's clock a minute ahead of the process (the store clock's measured offset).
 */
describe('pending invocations and the event clock [postgres]', () => {
  let t: TestEngine;
  beforeEach(async () => { t = await openAdmissionTest('postgres'); });
  afterEach(() => t.close());

  it('TestPendingInvoke_ReplayReadsTheEventClock: a cancel stamped after the process\'s time still cancels the child before its dispatch', async () => {
    t.db.clock.advance(60_000); // the database's clock runs a minute ahead of this process
    const eventId = await emitCancel(t, 'A');
    const [stamp] = await t.db.store.read('test.eventTs', (tx) => tx.query<{ ts: unknown }>(`SELECT ts FROM events WHERE id = $1`, [eventId]));
    expect(Number(stamp.ts)).toBeGreaterThan(Date.now() + 30_000);

    const { parentId, childId, stepId } = await reportInvoke(t, 'A');
    await waitFor('the child cancelled', () => cancelledUnclaimed(t, childId));
    expect(await readRun(t, childId)).toMatchObject({ error: { message: `cancel_on: order.cancelled ${eventId}` } });
    await waitFor('the parent woken', async () => (await readStep(t, parentId, stepId))?.status === 'failed' || undefined);
    await drainFollowUps(t.engine);
  });
});
