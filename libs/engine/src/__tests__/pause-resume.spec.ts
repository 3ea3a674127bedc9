import { JobAssignment } from '@ironflow/contracts';
import { STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, readAudit, readLeases, readRun, readStep, settle, stepId } from './engine-kit.test';

const LEASE = 30_000;

/**
 * Pause / resume / inject step output (WIRE-PROTOCOL.md 5.2, issue 9 item 5): a run parks at its
 * next segment boundary, holds no lease while paused, is neither claimed nor recovered, and a
 * resume sends it back to its open wait or to the queue.
 */
describe.each(STORES)('pause, resume and step injection [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect, { leaseMs: LEASE });
    await t.engine.api.registerFunction(t.scope, { id: 'job', mode: 'pull', triggers: [{ event: 'go' }], retry: { maxAttempts: 3, initialDelayMs: 60_000, backoffFactor: 1, maxDelayMs: 60_000 } });
    await t.engine.pull.register(t.scope, WORKER, { worker_id: WORKER, function_ids: ['job'] });
  });
  afterEach(() => t.close());

  const start = async (): Promise<string> => (await t.engine.api.trigger(t.scope, { event: 'go', data: { n: 1 } })).runIds[0];
  const poll = () => t.engine.pull.poll(WORKER, 5);
  const yieldSleep = (job: JobAssignment, name: string, untilMs: number, steps: unknown[] = []) =>
    t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(job.run_id, name), until: new Date(untilMs).toISOString() }, steps: steps as never }));

  it('parks a queued run at once: it is not claimed while paused, and a resume queues it again', async () => {
    const runId = await start();
    const paused = await t.engine.api.pauseRun(t.scope, runId, 'inspect first');
    expect(paused.status).toBe('paused');
    expect(paused.run).toMatchObject({ status: 'paused', pauseRequested: true, pauseReason: 'inspect first' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'paused', resumeStatus: 'waiting_for_capacity', pauseRequested: true });
    expect(await poll()).toEqual([]);
    expect(await readAudit(t, runId, 'run.paused')).toEqual([expect.objectContaining({ data: expect.objectContaining({ resume_status: 'waiting_for_capacity', reason: 'inspect first' }) })]);

    const resumed = await t.engine.api.resumeRun(t.scope, runId);
    expect(resumed).toMatchObject({ status: 'waiting_for_capacity' });
    expect(resumed.pauseRequested).toBeUndefined();
    expect(await readAudit(t, runId, 'run.resumed')).toEqual([expect.objectContaining({ data: { from: 'paused', to: 'waiting_for_capacity' } })]);
    const [job] = await poll();
    expect(job.run_id).toBe(runId);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { ok: true } }));
    expect(await readRun(t, runId)).toMatchObject({ status: 'completed', pauseRequested: false });
  });

  it('lets a running segment finish: its yield parks the run, which holds no lease and keeps its due sleep for the resume', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    expect((await t.engine.api.pauseRun(t.scope, runId)).status).toBe('pause_requested');
    expect(await readRun(t, runId)).toMatchObject({ status: 'running', pauseRequested: true });
    expect(await readAudit(t, runId, 'run.pause_requested')).toHaveLength(1);

    const until = t.db.clock.now() + 1000;
    const result = await yieldSleep(job, 'nap', until, [{ id: stepId(runId, 'fetch'), name: 'fetch', type: 'invoke', status: 'completed', output: { price: 10 } }]);
    expect(result.run.status).toBe('paused');
    expect(await readRun(t, runId)).toMatchObject({ status: 'paused', resumeStatus: 'waiting' });
    expect(await readLeases(t, runId)).toEqual([]);
    expect(await readAudit(t, runId, 'run.paused')).toEqual([expect.objectContaining({ data: expect.objectContaining({ resume_status: 'waiting' }) })]);

    t.db.clock.advance(2000);
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
    expect(await readStep(t, runId, stepId(runId, 'nap'))).toMatchObject({ status: 'completed' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'paused', resumeStatus: 'waiting_for_capacity' });
    expect(await poll()).toEqual([]);

    expect((await t.engine.api.resumeRun(t.scope, runId)).status).toBe('waiting_for_capacity');
    const [next] = await poll();
    expect(next.completed_steps.map((s) => s.name)).toEqual(['fetch', 'nap']);
  });

  it('sends a run resumed before its sleep is due back to waiting, and the sleep then queues it', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    await yieldSleep(job, 'nap', t.db.clock.now() + 60_000);
    expect((await t.engine.api.pauseRun(t.scope, runId)).status).toBe('paused');
    expect(await readRun(t, runId)).toMatchObject({ status: 'paused', resumeStatus: 'waiting' });
    expect((await t.engine.api.resumeRun(t.scope, runId)).status).toBe('waiting');
    t.db.clock.advance(61_000);
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('parks a retry with its backoff kept: the resumed run is not claimed before the backoff ends', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    await t.engine.api.pauseRun(t.scope, runId);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error: { message: 'flaky', retryable: true } }));
    const parked = await readRun(t, runId);
    expect(parked).toMatchObject({ status: 'paused', resumeStatus: 'waiting_for_capacity', attempt: 2 });
    await t.engine.api.resumeRun(t.scope, runId);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', availableAt: parked.availableAt });
    expect(await poll()).toEqual([]);
    t.db.clock.advance(60_001);
    expect((await poll()).map((j) => [j.run_id, j.attempt])).toEqual([[runId, 2]]);
  });

  it('never recovers a paused run as lost, and parks an execution lost with a pause requested', async () => {
    const runId = await start();
    await pollAndAck(t);
    await t.engine.api.pauseRun(t.scope, runId);
    t.db.clock.advance(LEASE + 1);
    expect(await t.engine.recovery.scan()).toEqual(['requeued']);
    expect(await readRun(t, runId)).toMatchObject({ status: 'paused', resumeStatus: 'waiting_for_capacity', recoveries: 1, leaseToken: null });
    expect(await readLeases(t, runId)).toEqual([]);
    await settle(t);
    expect(await readAudit(t, runId, 'run.paused')).toEqual([expect.objectContaining({ data: expect.objectContaining({ resume_status: 'waiting_for_capacity' }) })]);
    t.db.clock.advance(LEASE * 10);
    expect(await t.engine.recovery.scan()).toEqual([]);
    expect(await poll()).toEqual([]);
    expect(await readRun(t, runId)).toMatchObject({ status: 'paused' });
  });

  it('injects step outputs only while paused; the resumed segment memoizes them, and GetPausedState shows where the run parked', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    const fetch = stepId(runId, 'fetch');
    await yieldSleep(job, 'nap', t.db.clock.now() + 60_000, [{ id: fetch, name: 'fetch', type: 'invoke', status: 'completed', output: { price: 10 } }]);
    await expect(t.engine.api.injectStepOutput(t.scope, { runId, stepId: fetch, output: { price: 11 } })).rejects.toMatchObject({ code: 'RUN_NOT_PAUSED' });
    await expect(t.engine.api.getPausedState(t.scope, runId)).rejects.toMatchObject({ code: 'RUN_NOT_PAUSED' });

    await t.engine.api.pauseRun(t.scope, runId, 'fix the price');
    const injected = await t.engine.api.injectStepOutput(t.scope, { runId, stepId: fetch, output: { price: 12 }, reason: 'price was wrong' });
    expect(injected).toEqual({ stepId: fetch, previousOutput: { price: 10 } });
    const later = stepId(runId, 'charge');
    expect(await t.engine.api.injectStepOutput(t.scope, { runId, stepId: later, output: 'skipped' })).toEqual({ stepId: later });
    await expect(t.engine.api.injectStepOutput(t.scope, { runId, stepId: stepId(runId, 'nap'), output: 1 })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    await expect(t.engine.api.injectStepOutput(t.scope, { runId, stepId: 'other-run:fetch:0', output: 1 })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    expect(await readAudit(t, runId, 'run.step_injected')).toEqual([
      expect.objectContaining({ data: { step_id: fetch, previous_status: 'completed', reason: 'price was wrong' } }),
      expect.objectContaining({ data: { step_id: later, previous_status: null } }),
    ]);

    const state = await t.engine.api.getPausedState(t.scope, runId);
    expect(state).toMatchObject({ nextStepHint: 'nap', pauseReason: 'fix the price' });
    expect(state.steps.map((s) => [s.name, s.status, s.output, s.injected])).toEqual([
      ['fetch', 'completed', { price: 12 }, true],
      ['charge', 'completed', 'skipped', true],
    ]);

    await t.engine.api.resumeRun(t.scope, runId);
    t.db.clock.advance(61_000);
    await t.engine.scheduler.sleepSweep();
    const [next] = await poll();
    expect(next.completed_steps).toEqual(expect.arrayContaining([
      { step_id: fetch, name: 'fetch', output: { price: 12 } },
      { step_id: later, name: 'charge', output: 'skipped' },
    ]));
    const { steps } = await t.engine.api.getRunSteps(t.scope, runId);
    expect(steps.find((s) => s.id === fetch)).toMatchObject({ injected: true, output: { price: 12 } });
  });

  it('drops a pause request that a resume reaches first: the segment then ends as usual', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    await t.engine.api.pauseRun(t.scope, runId);
    expect((await t.engine.api.resumeRun(t.scope, runId)).pauseRequested).toBeUndefined();
    await yieldSleep(job, 'nap', t.db.clock.now() + 60_000);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting', pauseRequested: false });
  });

  it('answers repeats without change, refuses ended runs and from_step, and cancels a paused run', async () => {
    const runId = await start();
    await t.engine.api.pauseRun(t.scope, runId);
    const again = await t.engine.api.pauseRun(t.scope, runId);
    expect(again.status).toBe('paused');
    expect(await readAudit(t, runId, 'run.paused')).toHaveLength(1);
    await expect(t.engine.api.resumeRun(t.scope, runId, 'some-step')).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    await expect(t.engine.api.pauseRun(t.scope, 'no-such-run')).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
    await expect(t.engine.api.pauseRun({ ...t.scope, env: 'elsewhere' }, runId)).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });

    expect(await t.engine.api.cancelRun(t.scope, runId, 'not needed')).toMatchObject({ status: 'cancelled' });
    await expect(t.engine.api.resumeRun(t.scope, runId)).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
    await expect(t.engine.api.pauseRun(t.scope, runId)).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
    expect((await t.engine.api.getRun(t.scope, runId)).pauseRequested).toBeUndefined();

    const other = await start();
    expect(await t.engine.api.resumeRun(t.scope, other)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(await readAudit(t, other, 'run.resumed')).toEqual([]);
  });

  it('clears the pause when the run ends: a paused run cancelled, a running run with a pause requested cancelled or completing, show no pending pause', async () => {
    const parked = await start();
    await t.engine.api.pauseRun(t.scope, parked, 'look');
    await t.engine.api.cancelRun(t.scope, parked, 'not needed');
    expect(await readRun(t, parked)).toMatchObject({ status: 'cancelled', pauseRequested: false, pauseReason: null, resumeStatus: null });

    const requested = await start();
    await pollAndAck(t);
    expect((await t.engine.api.pauseRun(t.scope, requested, 'look')).status).toBe('pause_requested');
    await t.engine.api.cancelRun(t.scope, requested, 'not needed');
    expect(await readRun(t, requested)).toMatchObject({ status: 'cancelled', pauseRequested: false, pauseReason: null });
    const notPaused = await t.engine.api.getPausedState(t.scope, requested).catch((e: unknown) => e);
    expect(notPaused).toMatchObject({ code: 'RUN_NOT_PAUSED', message: `run ${requested} is cancelled, not paused` });

    const completing = await start();
    const job = await pollAndAck(t);
    await t.engine.api.pauseRun(t.scope, completing);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: 'done' }));
    expect(await readRun(t, completing)).toMatchObject({ status: 'completed', pauseRequested: false, pauseReason: null });
  });

  it('still fails a paused run whose wait times out: the pause holds only its next segment', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'wait_for_event', step_id: stepId(runId, 'approval'), event_filter: { event: 'approved', timeout: '1m' } } }));
    await t.engine.api.pauseRun(t.scope, runId);
    t.db.clock.advance(61_000);
    await t.engine.scheduler.timeoutSweep();
    expect(await readRun(t, runId)).toMatchObject({ status: 'failed', error: { code: 'EVENT_WAIT_TIMED_OUT' } });
  });

  it('keeps an event that arrives while paused for the resume', async () => {
    const runId = await start();
    const job = await pollAndAck(t);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'wait_for_event', step_id: stepId(runId, 'approval'), event_filter: { event: 'approved', timeout: '1h' } } }));
    await t.engine.api.pauseRun(t.scope, runId);
    await t.engine.api.trigger(t.scope, { event: 'approved', data: { by: 'ada' } });
    expect(await readRun(t, runId)).toMatchObject({ status: 'paused', resumeStatus: 'waiting_for_capacity' });
    expect(await poll()).toEqual([]);
    await t.engine.api.resumeRun(t.scope, runId);
    const [next] = await poll();
    expect(next.completed_steps).toEqual([expect.objectContaining({ name: 'approval', output: expect.objectContaining({ name: 'approved', data: { by: 'ada' } }) })]);
  });
});
