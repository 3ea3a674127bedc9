import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { subjects } from '@ironflow/bus';
import { SCOPE, TestEngine, countStreamMessages, openTestEngine, waitFor, waitForAdmission } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, registerPull, registerWorker, stepId } from '../engine-kit.test';
import { ADMISSION_TEST_CONFIG, ReportedInvoke, dispatchedUnclaimed, drainFollowUps, invocation, registerInvokeFunctions, reportInvoke, takeAllSlots } from './admission-kit';
import { ParentWaiting, endChild, metricValue, parentWaitingOnChild, readRun, readStep, registerParentAndChild, testLocker } from './post-commit-kit';

/** A short lock limit keeps these tests quick; the specification's default is 1 s (`lockLimitMs`). */
const LOCK_LIMIT_MS = 400;

/**
 * Every wait is bounded (specification, "Each wait for a lock inside the step write and the
 * resume's admission … has a 1 s limit on PostgreSQL"; "a pass that hits a locked row skips it and
 * comes back"): a wake, a pass or a timeout on a row another connection holds gives up at its
 * limit, changes nothing, and a later pass finishes it once the row clears; other runs keep
 * moving meanwhile. PostgreSQL only: the locks are real row locks held by a second connection in
 * an open transaction.
 */
describe('bounded lock waits [postgres]', () => {
  let t: TestEngine;
  const locks = testLocker(() => t.db);

  afterEach(async () => {
    await locks.release();
    await t.close();
  });

  const lockInvoke = (parentRunId: string) => locks.lock(`SELECT parent_run_id FROM function_invokes WHERE parent_run_id = $1 FOR UPDATE`, [parentRunId]);
  const lockRun = (runId: string) => locks.lock(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [runId]);

  describe.each(['refused', 'admitted'] as const)('TestPostCommit_LockWaitLeavesAdmissionWaiting', (kind) => {
    it(`TestPostCommit_LockWaitLeavesAdmissionWaiting: a resume ${kind === 'refused' ? 'refused for good' : 'that would be admitted'} on a locked parent row gives up, leaves the parent waiting with nothing written, and lands after the row clears`, async () => {
      t = await openTestEngine('postgres', { ...ADMISSION_TEST_CONFIG, lockLimitMs: LOCK_LIMIT_MS }, { bus: 'nats' });
      await registerInvokeFunctions(t);
      const { parentId, childId, stepId: invokeStep } = await reportInvoke(t, 'A');
      await waitForAdmission(t, childId);
      // A refusal no retry can change: the parent's function loses its endpoint.
      if (kind === 'refused') await t.engine.api.registerFunction(t.scope, { id: 'parent', mode: 'pull', triggers: [{ event: 'go' }] });
      const before = await readRun(t, parentId);
      await lockRun(parentId);

      await endChild(t.engine, t.scope, childId, 'completed');
      await drainFollowUps(t.engine);
      expect(await t.engine.wakes.waitingRunPass()).toBe(1); // the pass meets the same lock and gives up too
      await drainFollowUps(t.engine);

      expect(await readRun(t, parentId)).toEqual(before);
      expect(await readStep(t, parentId, invokeStep)).toMatchObject({ status: 'waiting' });
      expect(await readRun(t, childId)).toMatchObject({ status: 'completed', wakePending: true });
      expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, parentId))).toBe(0);

      await locks.release();
      expect(await t.engine.wakes.waitingRunPass()).toBe(1);
      await drainFollowUps(t.engine);
      expect(await readStep(t, parentId, invokeStep)).toMatchObject({ status: 'completed', output: { charged: 42 } });
      expect(await readRun(t, childId)).toMatchObject({ wakePending: false });
      if (kind === 'refused') {
        expect(await readRun(t, parentId)).toMatchObject({ status: 'failed', error: { code: 'ADMISSION_REFUSED', retryable: false } });
        expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, parentId))).toBe(1);
      } else {
        expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity', error: null });
      }
    });
  });

  describe.each(['run', 'step'] as const)('TestPostCommit_StuckRowDoesNotStallOtherWakes', (row) => {
    it(`TestPostCommit_StuckRowDoesNotStallOtherWakes: on a pool of 4, a parent's locked ${row} row holds up neither other parents' wakes nor the pass; the parent wakes after the row clears`, async () => {
      t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS, followUpDrainMs: 1000 }, { poolSize: 4 });
      expect(t.engine.resources.wakeSlots.size).toBe(1); // one slot: the stuck wake holds it while it waits
      await registerParentAndChild(t, 'push');
      const stuck = await parentWaitingOnChild(t, 'push');
      const others: ParentWaiting[] = [await parentWaitingOnChild(t, 'push'), await parentWaitingOnChild(t, 'push')];
      if (row === 'run') await locks.lock(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [stuck.parentId]);
      else await locks.lock(`SELECT step_id FROM steps WHERE run_id = $1 AND step_id = $2 FOR UPDATE`, [stuck.parentId, stuck.stepId]);

      for (const p of [stuck, ...others]) await endChild(t.engine, t.scope, p.childId, 'completed');
      for (const p of others) {
        await waitFor(`parent ${p.parentId} woken`, async () => (await readStep(t, p.parentId, p.stepId))?.status === 'completed');
        expect(await readRun(t, p.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
      }
      await t.engine.resources.followUps.drain(10_000);
      // The pass meets the lock, gives up and returns; the stuck parent is as it was.
      expect(await t.engine.wakes.waitingRunPass()).toBe(1);
      await t.engine.resources.followUps.drain(10_000);
      expect(await readRun(t, stuck.parentId)).toMatchObject({ status: 'waiting' });
      expect(await readStep(t, stuck.parentId, stuck.stepId)).toMatchObject({ status: 'waiting' });
      expect(await readRun(t, stuck.childId)).toMatchObject({ wakePending: true });

      await locks.release();
      expect(await t.engine.wakes.waitingRunPass()).toBe(1);
      await t.engine.resources.followUps.drain(10_000);
      expect(await readStep(t, stuck.parentId, stuck.stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
      expect(await readRun(t, stuck.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
      expect(await readRun(t, stuck.childId)).toMatchObject({ wakePending: false });
    });
  });

  it('TestPostCommit_PassGivesUpFailingALockedRun: the pass gives up failing a pull parent on its locked row, fails the others, and the failure lands once the row clears', async () => {
    t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS, followUpDrainMs: 1000 });
    await registerParentAndChild(t, 'pull');
    // The commits' wakes are lost, so the waiting-run pass is what fails the parents.
    const lost = jest.spyOn(t.engine.wakes, 'wakeParent').mockResolvedValue(undefined);
    const stuck = await parentWaitingOnChild(t, 'pull');
    await endChild(t.engine, t.scope, stuck.childId, 'failed');
    const other = await parentWaitingOnChild(t, 'pull');
    await endChild(t.engine, t.scope, other.childId, 'failed');
    lost.mockRestore();
    const before = await readRun(t, stuck.parentId);
    await lockRun(stuck.parentId);

    expect(await t.engine.wakes.waitingRunPass()).toBe(2);
    await waitFor('the other parent failed', async () => (await readRun(t, other.parentId))?.status === 'failed');
    await t.engine.resources.followUps.drain(10_000);
    expect(await readRun(t, other.parentId)).toMatchObject({ status: 'failed', error: { code: 'INVOKE_FAILED', child_run_id: other.childId } });
    expect(await readRun(t, stuck.parentId)).toEqual(before);
    expect(await readRun(t, stuck.childId)).toMatchObject({ wakePending: true });

    await locks.release();
    expect(await t.engine.wakes.waitingRunPass()).toBe(1);
    await t.engine.resources.followUps.drain(10_000);
    expect(await readRun(t, stuck.parentId)).toMatchObject({ status: 'failed', error: { code: 'INVOKE_FAILED', child_run_id: stuck.childId } });
    expect(await readRun(t, stuck.childId)).toMatchObject({ wakePending: false });
  });

  /** A pull run of `flow` waiting for `order.paid {orderId}` (1 min timeout). */
  const waitingForPayment = async (orderId: string): Promise<string> => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { orderId } });
    const job = await pollAndAck(t);
    await t.engine.pull.update('w1', job.job_id, fenced(job, {
      status: 'yielded',
      yield: { type: 'wait_for_event', step_id: stepId(runIds[0], 'paid'), event_filter: { event: 'order.paid', match: 'data.orderId', timeout: '1m' } },
    }));
    return runIds[0];
  };

  describe.each(['run', 'correlation'] as const)('TestPostCommit_PassGivesUpOnALockedWaitEvent', (row) => {
    it(`TestPostCommit_PassGivesUpOnALockedWaitEvent: a timed-out wait whose ${row} row is locked is left as it was while the sweep times out the others; it fails once the row clears`, async () => {
      t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS });
      await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
      await registerWorker(t, ['flow']);
      const stuck = await waitingForPayment('A');
      const other = await waitingForPayment('B');
      if (row === 'run') await locks.lock(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [stuck]);
      else await locks.lock(`SELECT run_id FROM waiting_correlations WHERE run_id = $1 FOR UPDATE`, [stuck]);
      t.db.clock.advance(61_000);

      expect(await t.engine.scheduler.timeoutSweep()).toBe(1);
      expect(await readRun(t, other)).toMatchObject({ status: 'failed', error: { code: 'EVENT_WAIT_TIMED_OUT' } });
      expect(await readRun(t, stuck)).toMatchObject({ status: 'waiting', error: null });
      expect(await readStep(t, stuck, stepId(stuck, 'paid'))).toMatchObject({ status: 'waiting' });

      await locks.release();
      expect(await t.engine.scheduler.timeoutSweep()).toBe(1);
      expect(await readRun(t, stuck)).toMatchObject({ status: 'failed', error: { code: 'EVENT_WAIT_TIMED_OUT' } });
      expect(await readStep(t, stuck, stepId(stuck, 'paid'))).toMatchObject({ status: 'timed_out' });
    });
  });

  it('a user cancel on a locked run row and a trigger on a locked waiting step row give up with UNAVAILABLE, change nothing, and go through once the rows clear', async () => {
    t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS });
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerWorker(t, ['flow']);
    const paid = await waitingForPayment('A');
    const other = await waitingForPayment('B');
    await lockRun(other);
    await locks.lock(`SELECT step_id FROM steps WHERE run_id = $1 FOR UPDATE`, [paid]);
    const errorsBefore = await metricValue(t.engine, 'ironflow_outcome_commit_errors_total', { unit: 'cancelRun' });

    await expect(t.engine.api.cancelRun(SCOPE, other, 'stop')).rejects.toMatchObject({ name: 'LockTimeoutError', code: 'UNAVAILABLE', retryable: true });
    expect(await metricValue(t.engine, 'ironflow_outcome_commit_errors_total', { unit: 'cancelRun' })).toBe(errorsBefore + 1);
    await expect(t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A' } })).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    expect(await readRun(t, other)).toMatchObject({ status: 'waiting', error: null });
    expect(await readStep(t, paid, stepId(paid, 'paid'))).toMatchObject({ status: 'waiting' });
    const stored = await t.db.store.read('test.events', (tx) => tx.query(`SELECT id FROM events WHERE name = 'order.paid'`));
    expect(stored).toEqual([]);

    await locks.release();
    expect(await t.engine.api.cancelRun(SCOPE, other, 'stop')).toMatchObject({ status: 'cancelled' });
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A' } });
    expect(await readStep(t, paid, stepId(paid, 'paid'))).toMatchObject({ status: 'completed' });
  });

  it('a worker report on a locked run row gives up at the lock limit with UNAVAILABLE (retryable), changes nothing, keeps the lease, and the same report lands once the row clears', async () => {
    t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS });
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerWorker(t, ['flow']);
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const before = await readRun(t, runId);
    await lockRun(runId);

    const report = fenced(job, { status: 'completed', output: { shipped: true }, steps: [] });
    await expect(t.engine.pull.update(WORKER, job.job_id, report)).rejects.toMatchObject({ name: 'LockTimeoutError', code: 'UNAVAILABLE', retryable: true });
    expect(await readRun(t, runId)).toEqual(before);

    await locks.release();
    expect(await t.engine.pull.update(WORKER, job.job_id, report)).toMatchObject({ effect: 'outcome' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'completed', output: { shipped: true } });
  });

  it('a push answer that meets a locked run row is applied again once the row clears: the run completes without waiting for lease recovery', async () => {
    const warnings: string[] = [];
    const logger = { log: () => undefined, error: () => undefined, warn: (message: string) => void warnings.push(message) };
    let release!: () => void;
    const answered = new Promise<void>((resolve) => (release = resolve));
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => void answered.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'completed', result: { ok: 1 }, steps: [] }))));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS, dispatchPollMs: 20 }, { logger });
      const { port } = server.address() as AddressInfo;
      await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: `http://127.0.0.1:${port}/api/ironflow`, triggers: [{ event: 'push.started' }] });
      const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'push.started', data: {} });
      t.engine.start({ pushDispatch: true, scheduler: false });
      await waitFor('the run claimed', async () => (await readRun(t, runId))?.status === 'running');
      await lockRun(runId);
      release();
      await waitFor('the answer to meet the locked row', () => warnings.includes('push report met a locked run row; applying it again'));
      expect((await readRun(t, runId))?.status).toBe('running');
      await locks.release();
      await waitFor('the run completed', async () => (await readRun(t, runId))?.status === 'completed');
      expect(await readRun(t, runId)).toMatchObject({ status: 'completed', output: { ok: 1 }, recoveries: 0 });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('TestReplayWaitEvent_StuckCorrelationDoesNotStopThePass: an event for a wait whose correlation row is locked still reaches its run (delivered by the trigger, which this engine has in place of a replay); the row stays open and a later event does nothing', async () => {
    t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS });
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerWorker(t, ['flow']);
    const stuck = await waitingForPayment('A');
    const other = await waitingForPayment('B');
    await locks.lock(`SELECT run_id FROM waiting_correlations WHERE run_id = $1 FOR UPDATE`, [stuck]);

    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A' } });
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'B' } });
    for (const [runId, orderId] of [[stuck, 'A'], [other, 'B']]) {
      expect(await readStep(t, runId, stepId(runId, 'paid'))).toMatchObject({ status: 'completed', output: { name: 'order.paid', data: { orderId } } });
      expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity' });
    }
    await locks.release();
    const open = await t.db.store.read('test.open', (tx) => tx.query<{ run_id: string }>(`SELECT run_id FROM waiting_correlations WHERE satisfied = 0`));
    expect(open.map((r) => r.run_id)).toEqual([stuck]);
    const before = await readRun(t, stuck);
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A' } });
    expect(await readRun(t, stuck)).toEqual(before);
  });

  describe.each([false, true])('TestPostCommit_LockedInvokeEdgeLeavesThePoolFree', (async) => {
    it(`TestPostCommit_LockedInvokeEdgeLeavesThePoolFree: with its function_invokes row locked, a ${async ? 'fire-and-forget' : 'sync'} invoke report returns, its edge write ends at its deadline and frees its slot, and the pass ${async ? 'dispatches and resumes' : 'dispatches'} once the row clears`, async () => {
      t = await openTestEngine('postgres', { ...ADMISSION_TEST_CONFIG, lockLimitMs: LOCK_LIMIT_MS }, { bus: 'nats', poolSize: 4 });
      await registerInvokeFunctions(t);
      const releaseSlots = await takeAllSlots(t.engine); // the admission waits for its slot until the row is locked
      const { parentId, childId, stepId: invokeStep } = await reportInvoke(t, 'A', { async });
      await lockInvoke(parentId);
      releaseSlots();
      await drainFollowUps(t.engine);

      expect(t.engine.resources.wakeSlots.free).toBe(t.engine.resources.wakeSlots.size);
      expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true, error: null });
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting', error: null });
      // The pool is free: the engine's own reads and claims still run.
      expect(await t.engine.dispatch.claim({ mode: 'pull', limit: 1, project: t.scope.project, env: t.scope.env }, 'node-a')).toEqual([]);

      await locks.release();
      expect((await invocation(t, parentId, invokeStep))?.settledAt).toBeNull();
      expect(await t.engine.pendingInvokes.run()).toBe(1);
      await drainFollowUps(t.engine);
      expect(await dispatchedUnclaimed(t, childId)).toBe(true);
      expect((await invocation(t, parentId, invokeStep))?.settledAt).not.toBeNull();
      expect(await readRun(t, parentId)).toMatchObject({ status: async ? 'waiting_for_capacity' : 'waiting' });
    });
  });

  it('TestPostCommit_LockedInvokeEdgeLeavesThePoolFree: after a thaw, with their function_invokes rows locked, the pass\'s page of children keeps to its slots, each edge write ends at its deadline, the pool stays free, and the next pass dispatches and resumes once the rows clear', async () => {
    t = await openTestEngine('postgres', { ...ADMISSION_TEST_CONFIG, lockLimitMs: LOCK_LIMIT_MS }, { bus: 'nats', poolSize: 4 });
    await registerInvokeFunctions(t);
    // Each invoke is reported while the instance is frozen, so its admission waits for the thaw and
    // is left to the pass (the engine thaws between reports: a frozen instance claims no parent).
    const page: (ReportedInvoke & { async: boolean })[] = [];
    for (const [orderId, async] of [['A', true], ['B', false], ['C', true]] as const) {
      page.push({ ...(await reportInvoke(t, orderId, { async, beforeReport: () => t.engine.instance.freeze('admin') })), async });
      await drainFollowUps(t.engine);
      await t.engine.instance.thaw('admin');
    }
    for (const { childId } of page) expect(await readRun(t, childId)).toMatchObject({ held: true });
    await locks.lock(`SELECT parent_run_id FROM function_invokes WHERE parent_run_id = ANY($1) FOR UPDATE`, [page.map((p) => p.parentId)]);

    expect(await t.engine.pendingInvokes.run()).toBe(page.length);
    const drained = drainFollowUps(t.engine);
    let draining = true;
    void drained.finally(() => (draining = false));
    // While the page's admissions wait on the rows, at most one per slot holds a connection, and
    // the engine's own claims still get one from the pool of 4.
    const slots = t.engine.resources.wakeSlots.size;
    let most = 0;
    await waitFor('an admission waits on a locked edge', async () => (most = Math.max(most, await locks.waiters())) > 0);
    expect(await t.engine.dispatch.claim({ mode: 'pull', limit: 1, project: t.scope.project, env: t.scope.env }, 'node-a')).toEqual([]);
    while (draining) most = Math.max(most, await locks.waiters());
    // Each edge write ended at its deadline: the admissions are done with the rows still locked.
    expect(await drained).toBe(true);
    expect(await locks.waiters()).toBe(0);
    expect(most).toBeLessThanOrEqual(slots);
    expect(t.engine.resources.wakeSlots.free).toBe(slots);
    for (const { parentId, childId, stepId: invokeStep } of page) {
      expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true, error: null });
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting', error: null });
      expect((await invocation(t, parentId, invokeStep))?.settledAt).toBeNull();
    }

    await locks.release();
    expect(await t.engine.pendingInvokes.run()).toBe(page.length);
    await drainFollowUps(t.engine);
    for (const { parentId, childId, stepId: invokeStep, async } of page) {
      expect(await dispatchedUnclaimed(t, childId)).toBe(true);
      expect((await invocation(t, parentId, invokeStep))?.settledAt).not.toBeNull();
      expect(await readRun(t, parentId)).toMatchObject({ status: async ? 'waiting_for_capacity' : 'waiting' });
    }
  });
});
