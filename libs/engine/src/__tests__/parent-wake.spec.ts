import { InProcessBus } from '@ironflow/bus';
import { JobAssignment } from '@ironflow/contracts';
import { Engine, toPushRequest } from '@ironflow/engine';
import { ExecutionFence } from '@ironflow/fencing';
import { SCOPE, STORES, TestEngine, openTestEngine, waitForAdmission } from '@ironflow/testing';
import {
  WORKER,
  counterValue,
  fenced,
  outcomesAnnounced,
  pollAndAck,
  readLeases,
  readRun,
  readStep,
  registerPull,
  registerWorker,
  settle,
  snapshot,
  stepId,
} from './engine-kit.test';

/**
 * The parent wake (specification, "A parent run is woken once"): a child's committed outcome is
 * copied onto the parent's waiting invoke step and the parent is queued (or, over pull, where a
 * failed step cannot be expressed, failed with INVOKE_FAILED naming the child). A second wake
 * changes nothing, and a wake lost to a crash after the child's commit is recovered by the
 * waiting-run pass of a fresh engine sharing only the store.
 */
describe.each(STORES)('parent wake [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'parent', triggers: [{ event: 'order.placed' }] });
    await registerPull(t, { id: 'child' });
    await t.engine.api.registerFunction(SCOPE, { id: 'push-parent', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called', triggers: [{ event: 'push.started' }] });
    await registerWorker(t, ['parent', 'child']);
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await t.close();
  });

  const wakes = (engine: Engine, path?: 'commit' | 'pass') => counterValue(engine.resources.metrics.parentWakes, path ? { path } : {});

  /** A pull parent that yielded `step.invoke('child')`; returns the parent, its invoke step and the child. */
  async function pullParentInvoking(invokeTimeoutMs = 60_000): Promise<{ parentId: string; invokeId: string; childId: string }> {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { orderId: 'A' } });
    const parentId = runIds[0];
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(parentId);
    const invokeId = stepId(parentId, 'child');
    const yielded = await t.engine.pull.update(WORKER, job.job_id, fenced(job, {
      status: 'yielded',
      yield: { type: 'invoke_function', step_id: invokeId, function_id: 'child', input: { n: 2 }, invoke_timeout_ms: invokeTimeoutMs },
    }));
    expect(yielded.effect).toBe('waiting');
    const step = await readStep(t, parentId, invokeId);
    expect(step).toMatchObject({ type: 'invoke', status: 'waiting', name: 'child' });
    const childId = step.childRunId!;
    expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', parentRunId: parentId, parentStepId: invokeId, input: { n: 2 } });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting', version: 3 });
    await waitForAdmission(t, childId);
    return { parentId, invokeId, childId };
  }

  /** A push parent, claimed and driven by hand, that yielded `step.invoke('child')`. */
  async function pushParentInvoking(): Promise<{ parentId: string; invokeId: string; childId: string }> {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'push.started', data: {} });
    const parentId = runIds[0];
    const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 1 }, 'node');
    expect(segment.run.id).toBe(parentId);
    const fence: ExecutionFence = { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! };
    const invokeId = stepId(parentId, 'child');
    const result = await t.engine.reports.apply(parentId, fence, {
      kind: 'yielded',
      yield: { type: 'invoke_function', step_id: invokeId, function_id: 'child', input: { n: 3 }, invoke_timeout_ms: 60_000 },
      steps: [],
    });
    expect(result.effect).toBe('waiting');
    const childId = (await readStep(t, parentId, invokeId)).childRunId!;
    await waitForAdmission(t, childId);
    return { parentId, invokeId, childId };
  }

  async function childJob(childId: string): Promise<JobAssignment> {
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(childId);
    return job;
  }

  async function completeChild(childId: string, output: unknown): Promise<void> {
    const job = await childJob(childId);
    expect(job.event).toMatchObject({ name: 'ironflow/function.invoked' });
    expect((await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output }))).effect).toBe('outcome');
  }

  async function failChild(childId: string): Promise<void> {
    const job = await childJob(childId);
    const error = { message: 'out of stock', code: 'NON_RETRYABLE', retryable: false };
    expect((await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error }))).effect).toBe('outcome');
  }

  /** A repeated wake and the waiting-run pass leave parent and child exactly as they are. */
  async function expectSecondWakeChangesNothing(parentId: string, childId: string): Promise<void> {
    const parentBefore = await snapshot(t, parentId);
    const childBefore = await snapshot(t, childId);
    const wakesBefore = await wakes(t.engine);
    await t.engine.wakes.wakeParent(await readRun(t, childId));
    expect(await t.engine.wakes.waitingRunPass()).toBe(0);
    await settle(t);
    expect(await snapshot(t, parentId)).toEqual(parentBefore);
    expect(await snapshot(t, childId)).toEqual(childBefore);
    expect(await wakes(t.engine)).toBe(wakesBefore);
  }

  it('pull parent: a completed child completes the invoke step with its output and queues the parent', async () => {
    const { parentId, invokeId, childId } = await pullParentInvoking();
    await completeChild(childId, { doubled: 4 });
    await settle(t);

    expect(await readStep(t, parentId, invokeId)).toMatchObject({ status: 'completed', output: { doubled: 4 }, childRunId: childId, error: null });
    const parent = await readRun(t, parentId);
    expect(parent).toMatchObject({ status: 'waiting_for_capacity', version: 4, attempt: 1 });
    expect(parent.availableAt).toBeLessThanOrEqual(t.db.clock.now());
    expect(await readRun(t, childId)).toMatchObject({ status: 'completed', wakePending: false });
    expect(await wakes(t.engine, 'commit')).toBe(1);

    const next = await pollAndAck(t);
    expect(next).toMatchObject({ run_id: parentId, execution_seq: 2, completed_steps: [{ step_id: invokeId, name: 'child', output: { doubled: 4 } }] });
  });

  it('pull parent: a failed (non-retryable) child fails the parent with INVOKE_FAILED naming the child run', async () => {
    const { parentId, invokeId, childId } = await pullParentInvoking();
    await failChild(childId);
    await settle(t);

    const parent = await readRun(t, parentId);
    expect(parent).toMatchObject({ status: 'failed', version: 4, error: { code: 'INVOKE_FAILED', retryable: false, child_run_id: childId, function_id: 'child' } });
    expect(parent.error!.message).toContain(childId);
    expect(parent.error!.message).toContain('out of stock');
    const step = await readStep(t, parentId, invokeId);
    expect(step.status).toBe('failed');
    expect(JSON.parse(step.error as string)).toMatchObject({ child_run_id: childId, function_id: 'child' });
    expect(await readRun(t, childId)).toMatchObject({ status: 'failed', wakePending: false });
    expect(await readLeases(t, parentId)).toEqual([]);
    expect(await outcomesAnnounced(t.engine, 'failed')).toBe(2);
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);

    await expectSecondWakeChangesNothing(parentId, childId);
  });

  it('push parent: a failed child fails the invoke step (error JSON with child_run_id) and queues the parent', async () => {
    const { parentId, invokeId, childId } = await pushParentInvoking();
    const waitingVersion = (await readRun(t, parentId)).version;
    await failChild(childId);
    await settle(t);

    const step = await readStep(t, parentId, invokeId);
    expect(step.status).toBe('failed');
    expect(typeof step.error).toBe('string');
    expect(JSON.parse(step.error as string)).toMatchObject({ child_run_id: childId, function_id: 'child', cause: 'out of stock' });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity', version: waitingVersion + 1, error: null });
    expect(await readRun(t, childId)).toMatchObject({ status: 'failed', wakePending: false });

    await expectSecondWakeChangesNothing(parentId, childId);

    // The next push request carries the failed step, its error as the JSON string the SDK parses.
    const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 1 }, 'node');
    expect(segment.run.id).toBe(parentId);
    expect(toPushRequest(segment).steps).toEqual([{ id: invokeId, name: 'child', status: 'failed', error: step.error }]);
  });

  it('a second wake changes nothing (completed child, pull parent)', async () => {
    const { parentId, childId } = await pullParentInvoking();
    await completeChild(childId, { doubled: 4 });
    await settle(t);
    expect(await wakes(t.engine)).toBe(1);
    await expectSecondWakeChangesNothing(parentId, childId);
  });

  it('a late duplicate wake does not queue a parent that has moved on and waits on something else', async () => {
    const { parentId, childId } = await pullParentInvoking();
    await completeChild(childId, { doubled: 4 });
    await settle(t);
    // The parent's next segment sleeps: it is `waiting` again, on another step.
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(parentId);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, {
      status: 'yielded',
      yield: { type: 'sleep', step_id: stepId(parentId, 'nap'), until: new Date(t.db.clock.now() + 3_600_000).toISOString() },
    }));
    expect((await readRun(t, parentId)).status).toBe('waiting');
    await expectSecondWakeChangesNothing(parentId, childId);
    expect((await readRun(t, parentId)).status).toBe('waiting');
  });

  it('an invoke that times out cancels its running child; the step stays timed out and the late report changes nothing', async () => {
    const { parentId, invokeId, childId } = await pushParentInvoking();
    const job = await childJob(childId);
    t.db.clock.advance(60_001);
    expect(await t.engine.scheduler.timeoutSweep()).toBe(1);
    expect(await readStep(t, parentId, invokeId)).toMatchObject({ status: 'timed_out' });
    expect(await readRun(t, childId)).toMatchObject({ status: 'cancelled', error: { code: 'INVOKE_TIMED_OUT' } });
    await settle(t);
    const afterTimeout = await snapshot(t, parentId);
    expect(afterTimeout.run.status).toBe('waiting_for_capacity');

    const late = t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { late: true } }));
    await expect(late).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
    await settle(t);
    expect(await snapshot(t, parentId)).toEqual(afterTimeout);
    expect(await readRun(t, childId)).toMatchObject({ status: 'cancelled', wakePending: false });
    expect(await wakes(t.engine)).toBe(0);
  });

  it('an invoke whose child ended before the timeout sweep takes the child outcome, not a timeout', async () => {
    const { parentId, invokeId, childId } = await pushParentInvoking();
    const lost = jest.spyOn(t.engine.wakes, 'wakeParent').mockResolvedValueOnce(undefined); // the commit's wake is lost
    await completeChild(childId, { on: 'time' });
    await settle(t);
    lost.mockRestore();
    t.db.clock.advance(60_001);
    // The sweep leaves the ended child's step to its wake; the waiting-run pass applies it.
    expect(await t.engine.scheduler.timeoutSweep()).toBe(0);
    expect(await readStep(t, parentId, invokeId)).toMatchObject({ status: 'waiting' });
    expect(await t.engine.wakes.waitingRunPass()).toBe(1);
    await settle(t);
    expect(await readStep(t, parentId, invokeId)).toMatchObject({ status: 'completed', output: { on: 'time' } });
    expect(await readRun(t, childId)).toMatchObject({ status: 'completed', wakePending: false });
  });

  describe.each(['completed', 'failed', 'cancelled'] as const)('crash before the parent wake (%s child)', (childOutcome) => {
    it('the waiting-run pass of a fresh engine wakes the parent exactly once and clears wake_pending', async () => {
      const { parentId, invokeId, childId } = await pullParentInvoking();
      // The node dies between the child's commit and its parent wake: the follow-up never runs.
      const lost = jest.spyOn(t.engine.wakes, 'wakeParent').mockResolvedValue(undefined);
      if (childOutcome === 'completed') await completeChild(childId, { doubled: 4 });
      else if (childOutcome === 'failed') await failChild(childId);
      else expect((await t.engine.api.cancelRun(SCOPE, childId, 'stop the child')).status).toBe('cancelled');
      await settle(t);
      expect(lost).toHaveBeenCalledTimes(1);

      const child = await readRun(t, childId);
      expect(child).toMatchObject({ status: childOutcome, wakePending: true });
      const parentBefore = await readRun(t, parentId);
      expect(parentBefore.status).toBe('waiting');
      expect(await readStep(t, parentId, invokeId)).toMatchObject({ status: 'waiting' });

      // A fresh engine instance that shares only the store.
      const reopened = await t.db.reopen();
      const bus = new InProcessBus();
      const fresh = new Engine({ store: reopened.store, clock: reopened.clock, bus, config: { leaseMs: 30_000 } });
      try {
        expect(await fresh.wakes.waitingRunPass()).toBe(1);
        expect(await fresh.resources.followUps.drain(10_000)).toBe(true);

        const parent = await readRun(t, parentId);
        const step = await readStep(t, parentId, invokeId);
        expect(parent.version).toBe(parentBefore.version + 1);
        if (childOutcome === 'completed') {
          expect(parent.status).toBe('waiting_for_capacity');
          expect(step).toMatchObject({ status: 'completed', output: { doubled: 4 } });
        } else {
          expect(parent).toMatchObject({ status: 'failed', error: { code: 'INVOKE_FAILED', child_run_id: childId } });
          expect(step.status).toBe('failed');
          expect(JSON.parse(step.error as string)).toMatchObject({ child_run_id: childId });
          expect(await outcomesAnnounced(fresh, 'failed')).toBe(1);
        }
        expect(await readRun(t, childId)).toMatchObject({ status: childOutcome, wakePending: false });
        expect(await wakes(fresh, 'pass')).toBe(1);

        // Once only: the next pass finds nothing, and the dead node's wake, if it ever ran, changes nothing.
        const woken = { parent: await snapshot(t, parentId), child: await snapshot(t, childId) };
        expect(await fresh.wakes.waitingRunPass()).toBe(0);
        lost.mockRestore();
        await t.engine.wakes.wakeParent(child);
        await settle(t);
        expect({ parent: await snapshot(t, parentId), child: await snapshot(t, childId) }).toEqual(woken);
        expect(await wakes(fresh)).toBe(1);
        expect(await wakes(t.engine)).toBe(0);
      } finally {
        await fresh.stop(1000);
        await bus.close();
      }
    });
  });
});
