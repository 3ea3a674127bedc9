/**
 * Fence judgement of attempts the engine ended, and of REST reports from a worker that does not
 * hold the lease, on both stores: a worker's late report of an execution the engine timed out or
 * cancelled is refused with the fencing code (`STALE_EXECUTION` while the run goes on,
 * `RUN_NOT_RUNNING` once it ended) — never applied and never answered as a repeat of the outcome;
 * a REST report carrying the right fence from a worker that is not the lease holder is refused.
 */
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, readRun, registerPull, registerWorker } from './engine-kit.test';

describe.each(STORES)('late and foreign reports [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { leaseMs: 60_000 });
    await registerPull(t, { id: 'slow', triggers: [{ event: 'go' }], timeoutMs: 5_000, retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    await registerWorker(t, ['slow']);
    await registerWorker(t, ['slow'], 'w2');
  });
  afterEach(() => t.close());

  it('the late report of an execution that timed out on its last attempt is refused RUN_NOT_RUNNING, even one of the same outcome (failed)', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    t.db.clock.advance(5_001);
    expect(await t.engine.timeouts.scan()).toBe(1);
    const ended = await readRun(t, runId);
    expect(ended).toMatchObject({ status: 'failed', leaseToken: null, error: { code: 'FUNCTION_TIMED_OUT' } });

    await expect(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error: { message: 'late', retryable: false } }))).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
    await expect(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: 'late' }))).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'failed', version: ended.version, output: null, error: { code: 'FUNCTION_TIMED_OUT' } });
  });

  it('the late report of a cancelled execution is refused RUN_NOT_RUNNING and changes nothing', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    await t.engine.api.cancelRun(SCOPE, runId, 'stop it');
    const ended = await readRun(t, runId);
    for (const body of [{ status: 'completed', output: 'late' }, { status: 'failed', error: { message: 'late', retryable: true } }] as const) {
      await expect(t.engine.pull.update(WORKER, job.job_id, fenced(job, body))).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
    }
    expect(await readRun(t, runId)).toMatchObject({ status: 'cancelled', version: ended.version, output: null });
  });

  it('a REST report with the right fence from a worker that does not hold the lease is refused STALE_EXECUTION; the holder\'s report applies', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    await expect(t.engine.pull.update('w2', job.job_id, fenced(job, { status: 'completed', output: 'not mine' }))).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    await expect(t.engine.pull.update('w2', job.job_id, fenced(job, { status: 'progress', steps: [] }))).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'running', output: null });
    const applied = await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: 'mine' }));
    expect(applied.effect).toBe('outcome');
    expect(await readRun(t, runId)).toMatchObject({ status: 'completed', output: 'mine' });
  });
});
