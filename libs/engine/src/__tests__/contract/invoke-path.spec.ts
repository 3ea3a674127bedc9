import { Engine } from '@ironflow/engine';
import { ExecutionFence } from '@ironflow/fencing';
import { STORES, TestEngine } from '@ironflow/testing';
import { ADMISSION_TEST_CONFIG, cancelledUnclaimed, dispatchedUnclaimed, drainFollowUps, emitCancel, expectHeldWhileRowHeld, history, holdAudit, openAdmissionTest, reportInvoke } from './admission-kit';
import { pollOne, readRun, readStep } from './post-commit-kit';

/**
 * The invoke path (specification, "An invoked child replays cancel_on and is read again before it
 * is dispatched"): the child a report creates is held until its admission, off the report, has
 * written its `run.created` row and replayed `cancel_on` from the event log, so a cancel that came
 * first, on any node, ends it before any worker sees it. On SQLite and PostgreSQL, real NATS; the
 * "other node" is a second engine on the same database.
 */
describe.each(STORES)('invoke path [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => { t = await openAdmissionTest(dialect); });
  afterEach(() => t.close());
  const drain = (engine: Engine = t.engine) => drainFollowUps(engine);

  it('TestInvokePath_ChildHonoursCancelAnotherNodeTook: a cancel only the other node took cancels the new child before any dispatch, and its parent resumes', async () => {
    const otherNode = await t.restart({ bus: 'nats' });
    const eventId = await emitCancel(t, 'A', otherNode);
    await drain(otherNode);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A');
    await drain();

    expect(await cancelledUnclaimed(t, childId)).toBe(true);
    expect(await readRun(t, childId)).toMatchObject({ error: { message: `cancel_on: order.cancelled ${eventId}` } });
    expect(await t.engine.pull.poll('w1', 5)).toEqual([]);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('TestInvokePath_ChildWithoutAMatchIsDispatched: a cancel for another order, taken by the other node, leaves the new child dispatched', async () => {
    const otherNode = await t.restart({ bus: 'nats' });
    await emitCancel(t, 'B', otherNode);
    await drain(otherNode);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A');
    await drain();

    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
    const job = await pollOne(otherNode, childId);
    expect(job.event).toMatchObject({ data: { orderId: 'A' } });
  });

  it('TestInvokePath_RunCreatedPrecedesReplayedCancel: the child\'s run.created row lands before the replay cancels it, and sorts first', async () => {
    const eventId = await emitCancel(t, 'A');
    await drain();
    const audit = holdAudit(t.engine);
    const { childId } = await reportInvoke(t, 'A');
    await audit.reached();
    // A report's admission waits for its row as long as the row's audit budget.
    await expectHeldWhileRowHeld(t, childId, ADMISSION_TEST_CONFIG.auditBudgetMs);
    const releasedAt = t.db.clock.now();
    audit.release();
    await drain();

    const child = await readRun(t, childId);
    expect(child).toMatchObject({ status: 'cancelled', executionSeq: 0, error: { message: `cancel_on: order.cancelled ${eventId}` } });
    expect(child!.endedAt!).toBeGreaterThanOrEqual(releasedAt);
    const rows = await history(t, childId);
    expect(rows.map((r) => [r.eventType, r.cause])).toEqual([['run.created', 'invoke'], ['run.cancelled', 'cancel-on-event']]);
    expect(rows[0].id).toBeLessThan(rows[1].id);
  });

  it('TestInvokePath_StoppingEngineHonoursCancel: a child invoked while the engine stops gets the same replay, and is cancelled instead of queued', async () => {
    await emitCancel(t, 'A');
    await drain();
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'go', data: { orderId: 'A' } });
    const parentId = runIds[0];
    const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 1, project: t.scope.project, env: t.scope.env }, 'node-a');
    const fence: ExecutionFence = { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! };
    const stepId = `${parentId}:child:0`;
    const gate = t.gate.arm('report.afterRead', parentId);
    const reporting = t.engine.reports.apply(parentId, fence, { kind: 'yielded', yield: { type: 'invoke_function', step_id: stepId, function_id: 'child', input: { orderId: 'A' } } });
    await gate.reached;
    const stopping = t.engine.stop(10_000);
    gate.release();
    expect(await reporting).toMatchObject({ effect: 'waiting' });
    await stopping;

    const childId = (await readStep(t, parentId, stepId))!.childRunId!;
    expect(await cancelledUnclaimed(t, childId)).toBe(true);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('TestInvokePath_FailedReplayLeavesTheChildToRecovery: a failed replay read does not dispatch the child; the waiting-run pass admits it and resumes the parent', async () => {
    t.faults.fail({ unit: (name) => name === 'cancelOnReplayLog' }, 1);
    const { parentId, childId } = await reportInvoke(t, 'A', { async: true });
    await drain();
    expect(t.faults.failures).toEqual(['read cancelOnReplayLog']);
    expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });

    // The pending-invocation pass, which runs with the waiting-run pass.
    expect(await t.engine.pendingInvokes.run()).toBe(1);
    await drain();
    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });
});
