import { EngineError, JobAssignment, JobUpdateBody } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import {
  WORKER,
  fenced,
  outcomesAnnounced,
  pollAndAck,
  pollOne,
  ranStep,
  readLeases,
  readRun,
  readStep,
  readSteps,
  registerPull,
  registerWorker,
  settle,
  snapshot,
  stepId,
} from './engine-kit.test';

/**
 * Every run transition of DESIGN.md "Data model" driven step by step through the engine's
 * entry points (poll / ack / update, the scheduler sweeps, trigger, cancel), asserting the
 * stored rows after each move.
 */
describe.each(STORES)('run transitions [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }], retry: { maxAttempts: 2, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
    await registerPull(t, { id: 'once', triggers: [{ event: 'once.started' }], retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
    await registerPull(t, { id: 'child' });
    await registerWorker(t, ['flow', 'once', 'child']);
  });
  afterEach(() => t.close());

  async function start(event = 'order.placed', data: unknown = { orderId: 'A' }): Promise<string> {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event, data });
    expect(runIds).toHaveLength(1);
    return runIds[0];
  }

  it('claims a queued run: waiting_for_capacity → running with a new execution, lease token and version', async () => {
    const runId = await start();
    const queued = await readRun(t, runId);
    expect(queued).toMatchObject({ status: 'waiting_for_capacity', version: 1, executionSeq: 0, leaseToken: null, attempt: 1, startedAt: null });
    expect(await readLeases(t, runId)).toEqual([]);

    const job = await pollOne(t);
    const running = await readRun(t, runId);
    expect(running).toMatchObject({ status: 'running', version: 2, executionSeq: 1, attempt: 1 });
    expect(running.leaseToken).toBe(job.lease_token);
    expect(running.leaseToken).toMatch(/.+/);
    expect(running.startedAt).not.toBeNull();
    expect(job).toMatchObject({ job_id: `${runId}-1`, run_id: runId, function_id: 'flow', attempt: 1, execution_seq: 1, completed_steps: [], step_sequence_base: 0 });
    expect(await readLeases(t, runId)).toEqual([{ run_id: runId, execution_seq: 1, holder: WORKER }]);

    // The claimed run is not handed out again.
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
  });

  it('sleep yield: running → waiting; the sleep sweep queues it only once due; the next segment sees the sleep completed', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    const napId = stepId(runId, 'nap');
    const until = t.db.clock.now() + 60_000;

    // The SDK flushes the steps it ran as progress, then yields (WIRE-PROTOCOL.md 3.5).
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'progress', steps: [ranStep(runId, 'charge', { ok: true })], step_offset: 0 }));
    const yielded = await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: napId, until: new Date(until).toISOString() } }));
    expect(yielded.effect).toBe('waiting');

    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting', version: 3, executionSeq: 1 });
    expect(await readLeases(t, runId)).toEqual([]);
    expect(await readStep(t, runId, napId)).toMatchObject({ type: 'sleep', name: 'nap', status: 'waiting', wakeAt: until, sequence: 1 });

    // Not due yet: the sweep leaves it alone.
    expect(await t.engine.scheduler.sleepSweep()).toBe(0);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting', version: 3 });
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);

    t.db.clock.advance(60_001);
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
    expect(await readStep(t, runId, napId)).toMatchObject({ status: 'completed' });
    const woken = await readRun(t, runId);
    expect(woken).toMatchObject({ status: 'waiting_for_capacity', version: 4, attempt: 1 });
    expect(woken.availableAt).toBeLessThanOrEqual(t.db.clock.now());
    // A second sweep finds nothing to do.
    expect(await t.engine.scheduler.sleepSweep()).toBe(0);
    expect((await readRun(t, runId)).version).toBe(4);

    const next = await pollOne(t);
    expect(next).toMatchObject({ job_id: `${runId}-2`, execution_seq: 2, attempt: 1, step_sequence_base: 2 });
    expect(next.completed_steps).toEqual([
      { step_id: stepId(runId, 'charge'), name: 'charge', output: { ok: true } },
      { step_id: napId, name: 'nap', output: null },
    ]);
  });

  it('retryable failure with attempts left: running → waiting_for_capacity, attempt + 1, lease released, error kept', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    const error = { message: 'flaky upstream', code: 'ERROR', retryable: true };
    const before = t.db.clock.now();
    const result = await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error }));
    expect(result.effect).toBe('retry');

    const run = await readRun(t, runId);
    expect(run).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, version: 3, executionSeq: 1, error, endedAt: null });
    expect(run.availableAt).toBeGreaterThanOrEqual(before + 1000);
    expect(await readLeases(t, runId)).toEqual([]);
    expect(await outcomesAnnounced(t.engine)).toBe(0);
  });

  it('running → completed: output, steps and ended_at stored, lease released, one outcome announced', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    const result = await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { total: 42 }, steps: [ranStep(runId, 'sum', 42)], step_offset: 0 }));
    expect(result.effect).toBe('outcome');

    const run = await readRun(t, runId);
    expect(run).toMatchObject({ status: 'completed', output: { total: 42 }, error: null, version: 3, attempt: 1, wakePending: false });
    expect(run.endedAt).not.toBeNull();
    expect(await readLeases(t, runId)).toEqual([]);
    expect((await readSteps(t, runId)).map((s) => [s.stepId, s.status, s.output, s.sequence])).toEqual([[stepId(runId, 'sum'), 'completed', 42, 0]]);
    await settle(t);
    expect(await outcomesAnnounced(t.engine, 'completed')).toBe(1);
  });

  it('running → failed: a non-retryable error fails the run at once', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    const error = { message: 'card declined', code: 'NON_RETRYABLE', retryable: false };
    expect((await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error }))).effect).toBe('outcome');

    const run = await readRun(t, runId);
    expect(run).toMatchObject({ status: 'failed', attempt: 1, version: 3, output: null, error });
    expect(run.endedAt).not.toBeNull();
    expect(await readLeases(t, runId)).toEqual([]);
  });

  it('running → failed: a retryable error with no attempts left fails the run', async () => {
    const runId = await start('once.started');
    const job = await pollAndAck(t);
    const error = { message: 'still flaky', code: 'ERROR', retryable: true };
    expect((await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error }))).effect).toBe('outcome');

    expect(await readRun(t, runId)).toMatchObject({ status: 'failed', attempt: 1, maxAttempts: 1, version: 3, error });
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
  });

  it('→ cancelled from waiting_for_capacity: never dispatched afterwards', async () => {
    const runId = await start();
    const view = await t.engine.api.cancelRun(SCOPE, runId, 'no longer needed');
    expect(view).toMatchObject({ id: runId, status: 'cancelled', error: { message: 'no longer needed', code: 'CANCELLED', retryable: false } });

    expect(await readRun(t, runId)).toMatchObject({ status: 'cancelled', version: 2, executionSeq: 0 });
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
  });

  it('→ cancelled from running: the lease is released and the execution’s late report is RUN_NOT_RUNNING', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    expect((await t.engine.api.cancelRun(SCOPE, runId, '')).status).toBe('cancelled');

    const cancelled = await readRun(t, runId);
    expect(cancelled).toMatchObject({ status: 'cancelled', version: 3, error: { message: 'cancelled by user', code: 'CANCELLED' } });
    expect(await readLeases(t, runId)).toEqual([]);
    await expect(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: 1 }))).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING', httpStatus: 409 });
    expect(await readRun(t, runId)).toEqual(cancelled);
  });

  it('→ cancelled from waiting: a due sleep does not queue it again', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    const until = t.db.clock.now() + 5_000;
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until: new Date(until).toISOString() } }));
    expect((await readRun(t, runId)).status).toBe('waiting');

    expect((await t.engine.api.cancelRun(SCOPE, runId, 'stop')).status).toBe('cancelled');
    const cancelled = await readRun(t, runId);
    expect(cancelled).toMatchObject({ status: 'cancelled', version: 4 });

    t.db.clock.advance(5_001);
    await t.engine.scheduler.sleepSweep();
    expect(await readRun(t, runId)).toEqual(cancelled);
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
  });

  it('invoke_function_async completes its step with {run_id} and queues the parent at once', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    const invokeId = stepId(runId, 'child');
    const result = await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'invoke_function_async', step_id: invokeId, function_id: 'child', input: { sku: 'X1' } } }));
    expect(result.effect).toBe('queued');

    const parent = await readRun(t, runId);
    expect(parent).toMatchObject({ status: 'waiting_for_capacity', version: 3, attempt: 1 });
    expect(parent.availableAt).toBeLessThanOrEqual(t.db.clock.now());
    expect(await readLeases(t, runId)).toEqual([]);

    const { children } = await t.engine.api.getRunSteps(SCOPE, runId);
    expect(children).toHaveLength(1);
    const child = children[0];
    expect(child).toMatchObject({ functionId: 'child', status: 'waiting_for_capacity', parentRunId: runId, parentStepId: invokeId, input: { sku: 'X1' } });
    expect(await readStep(t, runId, invokeId)).toMatchObject({ type: 'invoke', name: 'child', status: 'completed', output: { run_id: child.id }, childRunId: child.id });

    // Both the parent's next segment and the child are claimable now.
    const jobs = await t.engine.pull.poll(WORKER, 5);
    expect(jobs.map((j) => j.run_id).sort()).toEqual([runId, child.id].sort());
    const parentJob = jobs.find((j) => j.run_id === runId)!;
    expect(parentJob).toMatchObject({ execution_seq: 2, completed_steps: [{ step_id: invokeId, name: 'child', output: { run_id: child.id } }] });
    const childJob = jobs.find((j) => j.run_id === child.id)!;
    expect(childJob.event).toMatchObject({ name: 'ironflow/function.invoked', data: { sku: 'X1' } });
  });

  it('waitForEvent: resumed by a matching event, not by a non-matching one or another event name', async () => {
    const runId = await start('order.placed', { orderId: 'A' });
    const job = await pollAndAck(t);
    const waitId = stepId(runId, 'payment');
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, {
      status: 'yielded',
      yield: { type: 'wait_for_event', step_id: waitId, event_filter: { event: 'order.paid', match: 'data.orderId', timeout: '1h' } },
    }));
    const waiting = await snapshot(t, runId);
    expect(waiting.run.status).toBe('waiting');
    expect(waiting.steps.find((s) => s.stepId === waitId)).toMatchObject({ type: 'wait_for_event', status: 'waiting', output: undefined });

    // Same name, other order: no effect.
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'B' } });
    // Right order, other name: no effect.
    await t.engine.api.trigger(SCOPE, { event: 'order.refunded', data: { orderId: 'A' } });
    // Same name, no value at the path: no effect.
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { other: 'A' } });
    expect(await snapshot(t, runId)).toEqual(waiting);
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);

    const { eventId } = await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A', amount: 10 } });
    const resumed = await readStep(t, runId, waitId);
    expect(resumed.status).toBe('completed');
    expect(resumed.output).toMatchObject({ id: eventId, name: 'order.paid', data: { orderId: 'A', amount: 10 } });
    expect(typeof (resumed.output as { timestamp: unknown }).timestamp).toBe('string');
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', version: 4 });

    // A second matching event changes nothing: the wait is already satisfied.
    const afterResume = await snapshot(t, runId);
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A', amount: 99 } });
    expect(await snapshot(t, runId)).toEqual(afterResume);

    const next = await pollOne(t);
    expect(next.run_id).toBe(runId);
    expect(next.completed_steps).toEqual([{ step_id: waitId, name: 'payment', output: resumed.output }]);
  });

  describe.each(['completed', 'failed', 'cancelled'] as const)('a %s run', (terminal) => {
    it('is never moved by a later report, cancel, sweep or poll', async () => {
      const runId = await start();
      const job = await pollAndAck(t);
      await finish(job, terminal);
      await settle(t);
      const before = await snapshot(t, runId);
      expect(before.run.status).toBe(terminal);
      const announced = await outcomesAnnounced(t.engine);
      expect(announced).toBe(1);

      // A cancel answers with the run as it stands.
      const cancelView = await t.engine.api.cancelRun(SCOPE, runId, 'too late');
      expect(cancelView.status).toBe(terminal);

      // Every report of the same execution, and a stale one: only a retry of the execution's own
      // outcome answers success (with no effect); everything else is RUN_NOT_RUNNING.
      const own = terminal === 'cancelled' ? 'RUN_NOT_RUNNING' : 'none';
      const cases: [JobUpdateBody, string][] = [
        [fenced(job, { status: 'completed', output: 'late' }), terminal === 'completed' ? own : 'RUN_NOT_RUNNING'],
        [fenced(job, { status: 'failed', error: { message: 'late', retryable: false } }), terminal === 'failed' ? own : 'RUN_NOT_RUNNING'],
        [fenced(job, { status: 'failed', error: { message: 'late', retryable: true } }), terminal === 'failed' ? own : 'RUN_NOT_RUNNING'],
        [fenced(job, { status: 'progress', steps: [ranStep(runId, 'late', 1)], step_offset: 0 }), 'RUN_NOT_RUNNING'],
        [fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(runId, 'late'), until: new Date(t.db.clock.now() + 1000).toISOString() } }), 'RUN_NOT_RUNNING'],
        [{ status: 'completed', output: 'stale', execution_seq: 1, lease_token: 'not-the-token' }, 'RUN_NOT_RUNNING'],
      ];
      for (const [report, expected] of cases) {
        const answer = await t.engine.pull.update(WORKER, job.job_id, report).then(
          (r) => r.effect as string,
          (err: unknown) => (err instanceof EngineError ? err.code : String(err)),
        );
        expect([report.status, answer]).toEqual([report.status, expected]);
      }

      t.db.clock.advance(10 * 60_000);
      await t.engine.scheduler.sleepSweep();
      await t.engine.scheduler.timeoutSweep();
      await t.engine.wakes.waitingRunPass();
      expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
      await settle(t);

      expect(await snapshot(t, runId)).toEqual(before);
      expect(await outcomesAnnounced(t.engine)).toBe(announced);
    });
  });

  async function finish(job: JobAssignment, terminal: 'completed' | 'failed' | 'cancelled'): Promise<void> {
    if (terminal === 'cancelled') {
      await t.engine.api.cancelRun(SCOPE, job.run_id, 'cancel');
      return;
    }
    const body = terminal === 'completed'
      ? fenced(job, { status: 'completed', output: { done: true } })
      : fenced(job, { status: 'failed', error: { message: 'boom', retryable: false } });
    expect((await t.engine.pull.update(WORKER, job.job_id, body)).effect).toBe('outcome');
  }
});
