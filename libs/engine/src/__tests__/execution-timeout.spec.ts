/**
 * The function timeout on the pull transports (issue 7 item 4): the engine stores each
 * execution's deadline with its lease (claim time + `timeoutMs`) and the capacity scanner's pass
 * fails an execution past it with `FUNCTION_TIMED_OUT`, retryable under the usual retry rules.
 * Heartbeats and progress keep the lease alive but never move the deadline. Both stores; time
 * moves with the store clock (`clock.advance`), never by waiting.
 */
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, ranStep, readLeases, readRun, registerPull, registerWorker } from './engine-kit.test';

describe.each(STORES)('function timeout on pull [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { leaseMs: 60_000 });
    await registerPull(t, { id: 'slow', triggers: [{ event: 'go' }], timeoutMs: 5_000, retry: { maxAttempts: 2, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    await registerWorker(t, ['slow']);
  });
  afterEach(() => t.close());

  it('an execution past timeoutMs fails with FUNCTION_TIMED_OUT and is retried; the second one past it fails the run', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const first = await pollAndAck(t);
    t.db.clock.advance(3_000);
    expect(await t.engine.timeouts.scan()).toBe(0);
    expect((await readRun(t, runId)).status).toBe('running');

    t.db.clock.advance(2_001);
    expect(await t.engine.timeouts.scan()).toBe(1);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, error: { code: 'FUNCTION_TIMED_OUT', retryable: true } });
    expect(await readLeases(t, runId)).toEqual([]);
    // The timed-out execution's late report is refused with the fencing code (the engine ended it).
    await expect(t.engine.pull.update(WORKER, first.job_id, fenced(first, { status: 'completed', output: 'late' }))).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', output: null });

    const second = await pollAndAck(t);
    expect(second.attempt).toBe(2);
    t.db.clock.advance(5_001);
    expect(await t.engine.timeouts.scan()).toBe(1);
    expect(await readRun(t, runId)).toMatchObject({ status: 'failed', attempt: 2, error: { code: 'FUNCTION_TIMED_OUT' } });
  });

  it('heartbeats and progress keep the lease alive but do not move the deadline', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    t.db.clock.advance(3_000);
    await t.engine.pull.heartbeat(WORKER, { worker_id: WORKER, jobs: [{ job_id: job.job_id }] });
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'progress', steps: [ranStep(runId, 'a', 1)], step_offset: 0 }));
    t.db.clock.advance(2_001);
    expect(await t.engine.recovery.scan()).toEqual([]); // the lease itself is far from expiry
    expect(await t.engine.timeouts.scan()).toBe(1);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', error: { code: 'FUNCTION_TIMED_OUT' } });
  });

  it('an execution that reported before its deadline is not timed out; a yield ends the deadline with the lease', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'wait_for_event', step_id: `${runId}:w:0`, event_filter: { event: 'never', timeout: '1h' } } }));
    t.db.clock.advance(10_000);
    expect(await t.engine.timeouts.scan()).toBe(0);
    expect((await readRun(t, runId)).status).toBe('waiting');
  });

  it('the scanner loop applies it without a direct call', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    await pollAndAck(t);
    t.db.clock.advance(5_001);
    t.engine.start({ pushDispatch: false, scheduler: false, scanner: true });
    const { waitFor } = await import('@ironflow/testing');
    await waitFor('the timeout to be applied', async () => (await readRun(t, runId)).status === 'waiting_for_capacity');
  });
});
