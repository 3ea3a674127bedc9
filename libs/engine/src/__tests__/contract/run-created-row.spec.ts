import { JobAssignment } from '@ironflow/contracts';
import { StoreClock } from '@ironflow/store';
import { STORES, CrashingFollowUpTracker, TestEngine, auditOf, faultsOf, openTestEngine, waitFor } from '@ironflow/testing';
import { ADMISSION_TEST_CONFIG, CHILD_CANCEL_ON, cancelledUnclaimed, dispatchedUnclaimed, drainFollowUps, history, registerInvokeFunctions, reportInvoke } from './admission-kit';
import { readRun } from './post-commit-kit';

/**
 * `TestRunCreatedRow_*` (specification, "Tests that pin this contract", `run_created_row_test.go`):
 * each kind of run gets its `run.created` row, and a row that lands late reads as the run's first
 * event, because it takes the run's creation time. The direct invoke's case is in
 * `audit-pressure.spec.ts`. Rows are held with the "block audit insert" hook behind the sink port.
 */
describe.each(STORES)('TestRunCreatedRow [%s]', (dialect) => {
  let t: TestEngine;
  let crashing: CrashingFollowUpTracker;
  beforeEach(async () => {
    crashing = new CrashingFollowUpTracker();
    t = await openTestEngine(dialect, ADMISSION_TEST_CONFIG, { bus: 'in-process', followUps: crashing });
  });
  afterEach(async () => {
    t.audit.unblock();
    await t.close();
  });

  const createdOnly = (row: { eventType: string }) => row.eventType === 'run.created';
  const childCreated = (row: { eventType: string; functionId: string | null }) => row.eventType === 'run.created' && row.functionId === 'child';
  const fenceOf = (job: JobAssignment) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });
  const events = async (runId: string) => (await history(t, runId)).map((h) => h.eventType);
  /** Completes `runId` as worker w1 (it must be the job polled). */
  const complete = async (runId: string) => {
    const job = await waitFor(`the job of ${runId}`, async () => (await t.engine.pull.poll('w1', 1)).find((j) => j.run_id === runId));
    await t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { ok: true }, ...fenceOf(job) });
  };
  /** The row's time is the run's creation time (the store clock did not move), whenever it was written. */
  const stampedAtCreation = async (runId: string) => {
    const [created] = (await history(t, runId)).filter((h) => h.eventType === 'run.created');
    expect(created.ts).toBe((await readRun(t, runId))!.createdAt);
  };

  it('TestRunCreatedRow_DebouncedRun: a debounced run gets its row, and a row that lands after the run ended reads as its first event', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'search', mode: 'pull', triggers: [{ event: 'search.typed' }], debounce: { periodMs: 10_000 } });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['search'] });
    await t.engine.api.trigger(t.scope, { event: 'search.typed', data: { q: 'a' } });
    t.db.clock.advance(10_001);
    t.audit.block(createdOnly);
    expect(await t.engine.debounces.pass()).toBe(1);
    const runId = (await t.engine.api.listRuns(t.scope, { functionId: 'search' })).runs[0].id;
    await complete(runId);
    await waitFor('the status row', async () => (await events(runId)).includes('run.status_changed') || undefined);
    expect(await events(runId)).toEqual(['run.status_changed']);
    t.audit.unblock();
    await waitFor('the created row', async () => (await events(runId)).length === 2 || undefined);
    expect(await events(runId)).toEqual(['run.created', 'run.status_changed']);
    await stampedAtCreation(runId);
  });

  it('TestRunCreatedRow_RecoveredDebouncedRun: a debounced run whose admission a crash cut off gets its row from the orphan sweep that re-admits it, and the row reads as its first event', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'search', mode: 'pull', triggers: [{ event: 'search.typed' }], debounce: { periodMs: 10_000 }, cancelOn: CHILD_CANCEL_ON });
    await t.engine.api.trigger(t.scope, { event: 'search.typed', data: { orderId: 'o-1' } });
    t.db.clock.advance(10_001);
    crashing.crash();
    expect(await t.engine.debounces.pass()).toBe(1);
    expect(crashing.dropped).toEqual(['run-admission']);
    const runId = (await t.engine.api.listRuns(t.scope, { functionId: 'search' })).runs[0].id;
    expect(await readRun(t, runId)).toMatchObject({ held: true });
    // A fresh node: its orphan sweep finds the held run and re-admits it, its row first.
    const fresh = await t.restart();
    // The fresh node's store clock moves as the first one's did, so the run is past its grace.
    (fresh.resources.clock as StoreClock).advance(10_001);
    await fresh.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['search'] });
    auditOf(fresh).block(createdOnly);
    expect([...(await fresh.orphans.run()).values()]).toEqual(['dispatched']);
    const job = await waitFor('the recovered run dispatched', async () => (await fresh.pull.poll('w1', 1)).find((j) => j.run_id === runId));
    await fresh.pull.update('w1', job.job_id, { status: 'completed', output: { ok: true }, ...fenceOf(job) });
    await waitFor('the status row', async () => (await events(runId)).includes('run.status_changed') || undefined);
    auditOf(fresh).unblock();
    await waitFor('the created row', async () => (await events(runId)).length === 2 || undefined);
    expect(await events(runId)).toEqual(['run.created', 'run.status_changed']);
    await stampedAtCreation(runId);
  });

  it('TestRunCreatedRow_RecoveredRunGetsOneRow: a run whose admission wrote its row and stopped before its dispatch gets no second row from the orphan sweep that re-admits it', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'guarded', mode: 'pull', triggers: [{ event: 'order.placed' }], cancelOn: CHILD_CANCEL_ON });
    // The admission's replay cannot read the event log: it stops after its row, before its dispatch.
    const heal = faultsOf(t.engine).fail({ query: (sql, params) => sql.includes('FROM events') && params.includes('order.cancelled') });
    const { runIds: [runId] } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'o-1' } });
    await drainFollowUps(t.engine);
    expect(await readRun(t, runId)).toMatchObject({ held: true });
    expect(await events(runId)).toEqual(['run.created']);
    heal();
    expect((await t.engine.orphans.run()).get(runId)).toBe('dispatched');
    await drainFollowUps(t.engine);
    expect(await events(runId)).toEqual(['run.created']);
    await stampedAtCreation(runId);
  });

  it('TestRunCreatedRow_FireAndForgetChild: a fire-and-forget child gets its row before its dispatch, stamped with its creation time', async () => {
    await registerInvokeFunctions(t);
    t.audit.block(childCreated);
    const { parentId, childId } = await reportInvoke(t, 'o-2', { async: true });
    await waitFor('the row held', () => t.audit.waiting === 1 || undefined);
    expect(await readRun(t, childId)).toMatchObject({ held: true });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
    t.audit.unblock();
    await drainFollowUps(t.engine);
    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    await complete(childId);
    await drainFollowUps(t.engine);
    expect(await events(childId)).toEqual(['run.created', 'run.status_changed']);
    await stampedAtCreation(childId);
  });

  it('TestRunCreatedRow_ChildCancelledAfterALostLink: a child whose parent step no longer links it is cancelled quietly and still gets its row', async () => {
    await registerInvokeFunctions(t);
    t.audit.block(childCreated);
    const { parentId, childId, stepId } = await reportInvoke(t, 'o-3');
    await waitFor('the row held', () => t.audit.waiting === 1 || undefined);
    // The link is lost while the admission waits for the row: the step links another run.
    await t.db.store.unitOfWork('test.loseLink', (tx) => tx.execute(`UPDATE steps SET child_run_id = $1 WHERE run_id = $2 AND step_id = $3`, ['someone-else', parentId, stepId]));
    t.audit.unblock();
    await drainFollowUps(t.engine);
    expect(await cancelledUnclaimed(t, childId)).toBe(true);
    expect((await readRun(t, childId))!.error?.message).toContain('invoke-link-failed');
    // Nobody announces the quiet cancel: the row is the child's only event.
    expect(await events(childId)).toEqual(['run.created']);
    await stampedAtCreation(childId);
  });
});
