/**
 * A worker that stops gives its work back, and a heartbeat tells a worker which jobs it lost
 * (issue 7 items 8 and 9), on both stores:
 * - a released execution is queued again at once, same attempt, its checkpointed steps kept; only
 *   the worker holding its live lease can release it;
 * - releases count toward the recovery ceiling: a job released forever ends failed with
 *   `EXECUTION_RECOVERY_EXHAUSTED` instead of looping, counted as an exhausted recovery;
 * - a released run with a pause requested parks, as its segment's report would have parked it;
 * - a REST heartbeat answers each listed job `refreshed` or `lost`; a heartbeat after the lease
 *   expired does not revive it (lease recovery then queues the run again).
 */
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, counterValue, fenced, pollAndAck, pollOne, ranStep, readAudit, readLeases, readRun, registerPull, registerWorker, stepId } from './engine-kit.test';

describe.each(STORES)('releasing work and lost jobs [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { leaseMs: 30_000 });
    await registerPull(t, { id: 'f', triggers: [{ event: 'go' }] });
    await registerWorker(t, ['f']);
    await registerWorker(t, ['f'], 'w2');
  });
  afterEach(() => t.close());

  const fenceOf = (job: { execution_seq?: number; lease_token?: string; run_id: string }) => ({ run_id: job.run_id, execution_seq: job.execution_seq, lease_token: job.lease_token });

  it('a released job is queued again at once, same attempt, counted toward the recovery ceiling; the next worker gets it with the checkpointed steps', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'progress', steps: [ranStep(runId, 'a', 'A')], step_offset: 0 }));
    await t.engine.pull.release(WORKER, job.job_id, fenceOf(job));

    const run = await readRun(t, runId);
    expect(run).toMatchObject({ status: 'waiting_for_capacity', attempt: 1, recoveries: 1, leaseToken: null, executionSeq: 1 });
    expect(run.availableAt).toBeLessThanOrEqual(t.db.clock.now());
    expect(await readLeases(t, runId)).toEqual([]);

    const next = await pollOne(t, 'w2');
    expect(next).toMatchObject({ run_id: runId, execution_seq: 2, attempt: 1, completed_steps: [{ step_id: stepId(runId, 'a'), name: 'a', output: 'A' }] });
    await expect(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: 'late' }))).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    await t.engine.resources.followUps.drain(5_000);
    expect((await readAudit(t, runId, 'run.execution_released')).map((a) => a.data)).toEqual([{ execution_seq: 1, holder: WORKER, attempt: 1 }]);
  });

  it('a released run with a pause requested parks instead of queueing: no worker gets it until the resume', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    expect((await t.engine.api.pauseRun(SCOPE, runId, 'hold')).status).toBe('pause_requested');
    await t.engine.pull.release(WORKER, job.job_id, fenceOf(job));

    expect(await readRun(t, runId)).toMatchObject({ status: 'paused', resumeStatus: 'waiting_for_capacity', pauseRequested: true, recoveries: 1, leaseToken: null, attempt: 1 });
    expect(await readLeases(t, runId)).toEqual([]);
    expect(await t.engine.pull.poll('w2', 1)).toEqual([]);
    await t.engine.resources.followUps.drain(5_000);
    expect((await readAudit(t, runId, 'run.paused')).map((a) => a.data)).toEqual([{ resume_status: 'waiting_for_capacity', attempt: 1, reason: 'hold' }]);
    expect(await readAudit(t, runId, 'run.execution_released')).toHaveLength(1);

    await t.engine.api.resumeRun(SCOPE, runId);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', pauseRequested: false });
    expect(await pollOne(t, 'w2')).toMatchObject({ run_id: runId, execution_seq: 2, attempt: 1 });
  });

  it('only the worker holding the live lease can release it: another worker, a wrong token, a second release, an ended run are refused', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    await expect(t.engine.pull.release('w2', job.job_id, {})).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    await expect(t.engine.pull.release(WORKER, job.job_id, { ...fenceOf(job), lease_token: 'nope' })).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    expect((await readRun(t, runId)).status).toBe('running');
    await t.engine.pull.release(WORKER, job.job_id, {});
    await expect(t.engine.pull.release(WORKER, job.job_id, {})).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    await t.engine.api.cancelRun(SCOPE, runId, 'stop');
    await expect(t.engine.pull.release(WORKER, job.job_id, {})).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
  });

  it('a REST heartbeat answers each listed job refreshed or lost: released, another worker\'s, not a job id', async () => {
    await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const released = await pollAndAck(t);
    const theirs = await pollAndAck(t, 'w2');
    await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const kept = await pollAndAck(t);
    await t.engine.pull.release(WORKER, released.job_id, {});
    const answer = await t.engine.pull.heartbeat(WORKER, { worker_id: WORKER, jobs: [{ job_id: kept.job_id }, { job_id: released.job_id }, { job_id: theirs.job_id }, { job_id: 'garbage' }] });
    expect(answer.jobs).toEqual([
      { job_id: kept.job_id, state: 'refreshed' },
      { job_id: released.job_id, state: 'lost' },
      { job_id: theirs.job_id, state: 'lost' },
      { job_id: 'garbage', state: 'lost' },
    ]);
  });

  it('a heartbeat after the lease expired does not revive it: answered lost, expiry unchanged, and lease recovery queues the run', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    const before = (await t.db.store.read('t', (tx) => tx.query<{ expires_at: unknown }>(`SELECT expires_at FROM leases WHERE run_id = $1`, [runId])))[0];
    t.db.clock.advance(30_001);
    const answer = await t.engine.pull.heartbeat(WORKER, { worker_id: WORKER, jobs: [{ job_id: job.job_id }] });
    expect(answer.jobs).toEqual([{ job_id: job.job_id, state: 'lost' }]);
    const after = (await t.db.store.read('t', (tx) => tx.query<{ expires_at: unknown }>(`SELECT expires_at FROM leases WHERE run_id = $1`, [runId])))[0];
    expect(Number(after.expires_at)).toBe(Number(before.expires_at));
    expect(await t.engine.recovery.scan()).toEqual(['requeued']);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', recoveries: 1 });
    // Nor does a progress report or an ack of the lost execution extend anything.
    await expect(t.engine.pull.ack(WORKER, job.job_id, fenceOf(job))).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
  });

  it('a job released again and again fails with EXECUTION_RECOVERY_EXHAUSTED on the release past the ceiling', async () => {
    await t.close();
    t = await openTestEngine(dialect, { leaseMs: 30_000, recoveryCeiling: 2 });
    await registerPull(t, { id: 'f', triggers: [{ event: 'go' }] });
    await registerWorker(t, ['f']);
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const exhausted = () => counterValue(t.engine.resources.metrics.leaseRecoveries, { effect: 'exhausted' });
    expect(await exhausted()).toBe(0);
    for (const recoveries of [1, 2]) {
      const job = await pollAndAck(t);
      await t.engine.pull.release(WORKER, job.job_id, fenceOf(job));
      expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', recoveries, attempt: 1 });
    }
    const last = await pollAndAck(t);
    await t.engine.pull.release(WORKER, last.job_id, fenceOf(last));
    const run = await readRun(t, runId);
    expect(run).toMatchObject({ status: 'failed', recoveries: 2 });
    expect(run.error).toMatchObject({ code: 'EXECUTION_RECOVERY_EXHAUSTED', retryable: false });
    expect(run.error?.message).toBe(`execution given back or lost 3 times in a row (last: worker ${WORKER} released job ${last.job_id})`);
    expect(await exhausted()).toBe(1);
    expect(await readLeases(t, runId)).toEqual([]);
    await expect(t.engine.pull.release(WORKER, last.job_id, {})).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });

  });
});
