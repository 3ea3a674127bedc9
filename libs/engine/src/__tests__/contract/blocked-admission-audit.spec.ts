import { JobAssignment } from '@ironflow/contracts';
import { STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { ADMISSION_TEST_CONFIG, CHILD_CANCEL_ON, dispatchedUnclaimed, drainFollowUps, history, registerInvokeFunctions, reportInvoke } from './admission-kit';
import { readRun, readStep } from './post-commit-kit';

/**
 * Contract tests of the specification "Two kinds of row on the way to an outcome" and the
 * accepted `step.invoke` report's order of effects (issue 10 item 2): a stuck `run.created` row
 * holds only its run's dispatch, and a stuck table holds neither the event router, the cron loop
 * nor an invoke report. Audit inserts are blocked with the "block audit insert" hook behind the
 * sink port (`t.audit`), with a budget long enough that only the test's `unblock` ends a write.
 */
describe.each(STORES)('blocked audit on the way to a dispatch [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect, ADMISSION_TEST_CONFIG, { bus: 'in-process' });
  });
  afterEach(async () => {
    t.audit.unblock();
    await t.close();
  });

  const fenceOf = (job: JobAssignment) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });
  const createdOnly = (row: { eventType: string }) => row.eventType === 'run.created';
  /** Polls as w1 once; the run ids it was given. */
  const polled = async () => (await t.engine.pull.poll('w1', 10)).map((j) => j.run_id);
  const runOf = async (functionId: string) => (await t.engine.api.listRuns(t.scope, { functionId })).runs.map((r) => r.id);

  it('TestPostCommit_BlockedAuditDoesNotHoldTheRouter: with every audit write stuck, the router returns from an event that wakes a waiting run and starts another', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'waiter', mode: 'pull' });
    await t.engine.api.registerFunction(t.scope, { id: 'starter', mode: 'pull', triggers: [{ event: 'approved' }], cancelOn: CHILD_CANCEL_ON });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['waiter', 'starter'] });
    const waiterId = (await t.engine.triggers.invoke(t.scope, 'waiter', {})).id;
    const [job] = await t.engine.pull.poll('w1', 1);
    const stepId = `${waiterId}:approval:0`;
    await t.engine.pull.update('w1', job.job_id, { status: 'yielded', yield: { type: 'wait_for_event', step_id: stepId, event_filter: { event: 'approved', timeout: '1h' } }, ...fenceOf(job) });
    await drainFollowUps(t.engine);
    t.audit.block();
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'approved', data: { orderId: 'o-1' } });
    // Returned: the waiting run is woken and queued, the new run created; their rows are stuck.
    expect(runIds).toHaveLength(1);
    expect(await readStep(t, waiterId, stepId)).toMatchObject({ status: 'completed' });
    await waitFor('a row stuck', () => t.audit.waiting > 0 || undefined);
    expect(await polled()).toEqual([waiterId]);
    expect(await readRun(t, runIds[0])).toMatchObject({ held: true });
    t.audit.unblock();
    await drainFollowUps(t.engine);
    expect(await dispatchedUnclaimed(t, runIds[0])).toBe(true);
    expect((await history(t, runIds[0])).map((h) => h.eventType)).toEqual(['run.created']);
  });

  it('TestPostCommit_BlockedRunCreatedHoldsOnlyItsDispatch: a stuck run.created row holds its run\'s dispatch, not the router, nor another run of the same event', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'guarded', mode: 'pull', triggers: [{ event: 'order.placed' }], cancelOn: CHILD_CANCEL_ON });
    await t.engine.api.registerFunction(t.scope, { id: 'plain', mode: 'pull', triggers: [{ event: 'order.placed' }] });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['guarded', 'plain'] });
    t.audit.block((row) => createdOnly(row) && row.functionId === 'guarded');
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'o-2' } });
    expect(runIds).toHaveLength(2);
    await waitFor('the guarded row stuck', () => t.audit.waiting === 1 || undefined);
    const [guarded] = await runOf('guarded');
    const [plain] = await runOf('plain');
    expect(await polled()).toEqual([plain]);
    expect(await readRun(t, guarded)).toMatchObject({ held: true });
    t.audit.unblock();
    await drainFollowUps(t.engine);
    expect(await polled()).toEqual([guarded]);
    expect((await history(t, guarded)).map((h) => h.eventType)).toEqual(['run.created']);
  });

  it('TestPostCommit_BlockedRunCreatedHoldsOnlyItsDispatch: a stuck run.created row holds its run\'s dispatch, not the cron loop', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'nightly', mode: 'pull', triggers: [{ cron: '*/10 * * * * *' }], cancelOn: CHILD_CANCEL_ON });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['nightly'] });
    t.audit.block(createdOnly);
    t.db.clock.advance(10_001);
    const started = await t.engine.cron.pass();
    expect(started).toBeGreaterThanOrEqual(1);
    await waitFor('the rows stuck', () => t.audit.waiting > 0 || undefined);
    const runs = await runOf('nightly');
    expect(runs).toHaveLength(started);
    expect(await polled()).toEqual([]);
    t.audit.unblock();
    await drainFollowUps(t.engine);
    expect((await polled()).sort()).toEqual([...runs].sort());
  });

  if (dialect === 'sqlite') {
    it('TestPostCommit_BlockedRunCreatedHoldsOnlyItsDispatch: a stuck run.created row of an invoked child holds the child\'s dispatch, not the invoking parent\'s report', async () => {
      await registerInvokeFunctions(t);
      t.audit.block((row) => createdOnly(row) && row.functionId === 'child');
      const { parentId, childId, stepId } = await reportInvoke(t, 'o-3');
      // The report returned: the parent waits on its child, whose dispatch waits for its row.
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting', childRunId: childId });
      await waitFor('the child row stuck', () => t.audit.waiting === 1 || undefined);
      expect(await readRun(t, childId)).toMatchObject({ held: true });
      t.audit.unblock();
      await drainFollowUps(t.engine);
      expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    });
  }

  describe.each([false, true])('TestPostCommit_BlockedAuditDoesNotHoldInvokeReport', (async) => {
    it(`TestPostCommit_BlockedAuditDoesNotHoldInvokeReport: with every audit write stuck, a ${async ? 'fire-and-forget' : 'sync'} step.invoke report returns; its rows, the child's dispatch${async ? ' and the parent\'s resume' : ''} follow in order once the table recovers, with the caller gone`, async () => {
      await registerInvokeFunctions(t);
      // The parent records steps, so a fire-and-forget invoke has its step.completed row.
      await t.engine.api.registerFunction(t.scope, { id: 'parent', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called', triggers: [{ event: 'go' }], recording: true });
      t.audit.block();
      // The caller's report returns with the table stuck; nothing of the caller is left after it.
      const { parentId, childId } = await reportInvoke(t, 'o-4', { async });
      await waitFor('rows stuck', () => t.audit.waiting > 0 || undefined);
      expect(await readRun(t, childId)).toMatchObject({ held: true });
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
      t.audit.unblock();
      await drainFollowUps(t.engine);
      expect(await dispatchedUnclaimed(t, childId)).toBe(true);
      expect(await readRun(t, parentId)).toMatchObject({ status: async ? 'waiting_for_capacity' : 'waiting' });
      const parentRows = await history(t, parentId);
      const [childCreated] = await history(t, childId);
      expect(childCreated.eventType).toBe('run.created');
      if (async) {
        const stepRow = parentRows.find((h) => h.eventType === 'step.completed');
        expect(stepRow).toBeDefined();
        // In order: the parent's step row was inserted before the child's run.created row.
        expect(stepRow!.id).toBeLessThan(childCreated.id);
      } else {
        expect(parentRows.map((h) => h.eventType)).toEqual(['run.created']);
      }
    });
  });
});
