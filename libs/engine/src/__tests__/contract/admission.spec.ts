import { subjects } from '@ironflow/bus';
import { ExecutionFence } from '@ironflow/fencing';
import { STORES, TestEngine, countStreamMessages, waitForAdmission } from '@ironflow/testing';
import { dispatchedUnclaimed, drainFollowUps, invocation, openAdmissionTest, reportInvoke, takeAllSlots } from './admission-kit';
import { auditRows, endChild, metricValue, pollOne, readRun, readStep } from './post-commit-kit';

const NO_ENDPOINT = /has no endpoint URL, so its push run cannot be dispatched/;

/**
 * A run's admission to the queue (specification, "A resume's admission can fail in two ways"):
 * a refusal no retry can change fails the run with its reason, in one unit of work with the step's
 * result, only if the run is unchanged since it was read, announced like any failure (which wakes
 * the parent above it); any other error leaves the run waiting with nothing written, for a pass to
 * try again. The refusal these tests use: a push function re-registered without an endpoint. On
 * SQLite and PostgreSQL, real NATS.
 */
describe.each(STORES)('admission [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => { t = await openAdmissionTest(dialect); });
  afterEach(() => t.close());
  const drain = () => drainFollowUps(t.engine);

  /** `parent` (push) waits on `child`; then `parent` is registered again as a pull function (no endpoint). */
  async function parentLosesItsEndpoint() {
    const reported = await reportInvoke(t, 'A');
    await waitForAdmission(t, reported.childId);
    await t.engine.api.registerFunction(t.scope, { id: 'parent', mode: 'pull', triggers: [{ event: 'go' }] });
    return reported;
  }

  it('TestAdmission_PermanentErrorFailsWithReason: a resume refused for good fails the parent with its reason, the step\'s result and the usual effects', async () => {
    const { parentId, childId, stepId } = await parentLosesItsEndpoint();
    await endChild(t.engine, t.scope, childId, 'completed');
    await drain();

    const parent = await readRun(t, parentId);
    expect(parent).toMatchObject({ status: 'failed', error: { code: 'ADMISSION_REFUSED', retryable: false } });
    expect(parent!.error!.message).toMatch(NO_ENDPOINT);
    // The step's result committed with the failure.
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await readRun(t, childId)).toMatchObject({ wakePending: false });
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, parentId))).toBe(1);
    expect(await countStreamMessages('PUBSUB', subjects.runEvent(t.scope.env, parentId, 'failed'))).toBe(1);
    const rows = await t.db.store.read('test', (tx) => tx.query<{ cause: string }>(`SELECT cause FROM audit_events WHERE run_id = $1 AND event_type = 'run.status_changed'`, [parentId]));
    expect(rows).toEqual([{ cause: 'admission-refused' }]);
  });

  it('TestAdmission_PermanentErrorFailsWithReason: a child whose dispatch is refused for good fails with its reason and wakes its parent', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'pchild', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called' });
    const releaseSlots = await takeAllSlots(t.engine); // the child's admission waits for a slot
    const { parentId, childId, stepId } = await reportInvoke(t, 'A', { functionId: 'pchild' });
    await t.engine.api.registerFunction(t.scope, { id: 'pchild', mode: 'pull' });
    releaseSlots();
    await drain();

    const child = await readRun(t, childId);
    expect(child).toMatchObject({ status: 'failed', executionSeq: 0, error: { code: 'ADMISSION_REFUSED' } });
    expect(child!.error!.message).toMatch(NO_ENDPOINT);
    expect((await invocation(t, parentId, stepId))?.settledAt).not.toBeNull();
    expect(await auditRows(t, childId, 'run.status_changed')).toBe(1);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('TestAdmission_PermanentErrorWakesTheParentsParent: the refused parent\'s failure wakes the run above it', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'grand', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called', triggers: [{ event: 'gogo' }] });
    // grand → parent: grand reports a step.invoke of `parent`.
    const top = await reportInvoke(t, 'A', { trigger: 'gogo', functionId: 'parent' });
    const parentId = top.childId;
    await waitForAdmission(t, parentId);
    // parent → child: claim the parent's segment and report its invoke of `child`.
    const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 1, project: t.scope.project, env: t.scope.env }, 'node-a');
    expect(segment.run.id).toBe(parentId);
    const fence: ExecutionFence = { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! };
    const stepId = `${parentId}:child:0`;
    await t.engine.reports.apply(parentId, fence, { kind: 'yielded', yield: { type: 'invoke_function', step_id: stepId, function_id: 'child', input: { orderId: 'A' } } });
    const childId = (await readStep(t, parentId, stepId))!.childRunId!;
    await waitForAdmission(t, childId);
    await t.engine.api.registerFunction(t.scope, { id: 'parent', mode: 'pull', triggers: [{ event: 'go' }] });

    await endChild(t.engine, t.scope, childId, 'completed');
    await drain();
    expect(await readRun(t, parentId)).toMatchObject({ status: 'failed', error: { code: 'ADMISSION_REFUSED' }, wakePending: false });
    const grandStep = await readStep(t, top.parentId, top.stepId);
    expect(grandStep?.status).toBe('failed');
    expect(JSON.parse(grandStep!.error as string)).toMatchObject({ child_run_id: parentId, function_id: 'parent' });
    expect(await readRun(t, top.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(await metricValue(t.engine, 'ironflow_parent_wakes_total')).toBe(2);
  });

  it('TestAdmission_PermanentErrorLosesToAConcurrentOutcome: a cancel committed between the wake\'s read and the refusal\'s commit stands; the refusal writes nothing', async () => {
    const { parentId, childId, stepId } = await parentLosesItsEndpoint();
    const gate = t.gate.arm('admission.afterRead', parentId);
    await endChild(t.engine, t.scope, childId, 'completed');
    await gate.reached;
    await t.engine.api.cancelRun(t.scope, parentId, 'customer called');
    gate.release();
    await drain();

    expect(await readRun(t, parentId)).toMatchObject({ status: 'cancelled', error: { code: 'CANCELLED', message: 'customer called' } });
    expect(await auditRows(t, parentId, 'run.status_changed')).toBe(0);
    expect(await metricValue(t.engine, 'ironflow_run_outcomes_total', { status: 'failed' })).toBe(0);
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, parentId))).toBe(1);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
    // The child's wake is left pending; the pass finds the parent ended and clears it.
    expect(await readRun(t, childId)).toMatchObject({ wakePending: true });
    await t.engine.wakes.waitingRunPass();
    await drain();
    expect(await readRun(t, childId)).toMatchObject({ wakePending: false });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'cancelled' });
  });

  it('TestAdmission_PermanentErrorWaitsOutAFreeze: during a freeze a refused resume writes nothing and the parent waits; after the thaw the pass fails it with its reason', async () => {
    const { parentId, childId, stepId } = await parentLosesItsEndpoint();
    const job = await pollOne(t.engine, childId);
    await t.engine.instance.freeze('admin', 'maintenance');
    // The child's attempt was in flight: its report still commits its outcome during the freeze.
    await t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { charged: 42 }, execution_seq: job.execution_seq, lease_token: job.lease_token });
    await drain();
    const held = async () => {
      expect(await readRun(t, childId)).toMatchObject({ status: 'completed', wakePending: true });
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
      expect(await auditRows(t, parentId, 'run.status_changed')).toBe(0);
      expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, parentId))).toBe(0);
    };
    await held();
    expect(await t.engine.wakes.waitingRunPass()).toBe(1);
    await drain();
    await held();

    await t.engine.instance.thaw('admin');
    expect(await t.engine.wakes.waitingRunPass()).toBe(1);
    await drain();
    const parent = await readRun(t, parentId);
    expect(parent).toMatchObject({ status: 'failed', error: { code: 'ADMISSION_REFUSED', retryable: false } });
    expect(parent!.error!.message).toMatch(NO_ENDPOINT);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await readRun(t, childId)).toMatchObject({ wakePending: false });
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, parentId))).toBe(1);
  });

  it('TestAdmission_PermanentErrorWaitsOutAFreeze: a freeze that lands between the wake\'s read and the refusal\'s commit holds the failure until the thaw', async () => {
    const { parentId, childId } = await parentLosesItsEndpoint();
    const gate = t.gate.arm('admission.afterRead', parentId);
    await endChild(t.engine, t.scope, childId, 'completed');
    await gate.reached;
    await t.engine.instance.freeze('admin');
    gate.release();
    await drain();
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
    expect(await readRun(t, childId)).toMatchObject({ wakePending: true });
    expect(await auditRows(t, parentId, 'run.status_changed')).toBe(0);

    await t.engine.instance.thaw('admin');
    await t.engine.wakes.waitingRunPass();
    await drain();
    expect(await readRun(t, parentId)).toMatchObject({ status: 'failed', error: { code: 'ADMISSION_REFUSED' } });
    expect(await readRun(t, childId)).toMatchObject({ wakePending: false });
    expect(await auditRows(t, parentId, 'run.status_changed')).toBe(1);
  });

  it('TestAdmission_RetryableErrorKeepsTheRunWaiting: a resume that fails on a store error leaves the parent waiting with nothing written; the pass resumes it', async () => {
    const { parentId, childId, stepId } = await reportInvoke(t, 'A');
    await waitForAdmission(t, childId);
    t.faults.fail({ unit: (name) => name === 'wakeParent' }, 1);
    await endChild(t.engine, t.scope, childId, 'completed');
    await drain();

    expect(t.faults.failures).toEqual(['unit wakeParent']);
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting', error: null });
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
    expect(await readRun(t, childId)).toMatchObject({ status: 'completed', wakePending: true });
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, parentId))).toBe(0);

    expect(await t.engine.wakes.waitingRunPass()).toBe(1);
    await drain();
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('TestAdmission_RetryableErrorKeepsTheRunWaiting: a child dispatch that fails on a store error leaves the child held and the parent waiting; the pass admits it', async () => {
    t.faults.fail({ unit: (name) => name === 'admitRun' }, 1);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A', { async: true });
    await drain();

    expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true, error: null });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting', error: null });
    expect((await invocation(t, parentId, stepId))?.settledAt).toBeNull();

    expect(await t.engine.pendingInvokes.run()).toBe(1);
    await drain();
    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });
});
