import { JobAssignment } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, outcomesAnnounced, pollAndAck, readAudit, readLeases, readRun, registerPull, registerWorker, settle } from './engine-kit.test';

/**
 * Retry scheduling (WIRE-PROTOCOL.md 1.8 "[I] Retry scheduling/backoff is the engine's job"):
 * a retryable failure with attempts left re-queues the run at failure time + initialDelayMs ×
 * backoffFactor^(attempt-1), capped at maxDelayMs; the next attempt gets attempt + 1; the last
 * attempt's retryable failure fails the run.
 *
 * The store clock is frozen for these tests (real time no longer moves it; only
 * `db.clock.advance` does), so "a poll just before available_at" cannot turn into a poll after
 * it on a slow machine.
 */
describe.each(STORES)('retry backoff [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    // One reading, then only `advance` moves it (two reads of Date.now() could straddle a millisecond).
    let frozen = t.db.clock.now();
    jest.spyOn(t.db.clock, 'now').mockImplementation(() => frozen);
    jest.spyOn(t.db.clock, 'advance').mockImplementation((ms: number) => {
      frozen += ms;
    });
    await registerPull(t, { id: 'flaky', triggers: [{ event: 'job.requested' }], retry: { maxAttempts: 3, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
    await registerWorker(t, ['flaky']);
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await t.close();
  });

  async function failRetryably(job: JobAssignment, message: string) {
    return t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error: { message, code: 'ERROR', retryable: true } }));
  }

  it('re-queues after 1000 ms then 2000 ms, hands out attempts 2 and 3 only when due, and fails on the third retryable failure', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'job.requested', data: {} });
    const runId = runIds[0];

    // Attempt 1 fails retryably.
    const first = await pollAndAck(t);
    expect(first).toMatchObject({ run_id: runId, attempt: 1, execution_seq: 1 });
    const failedAt1 = t.db.clock.now();
    expect((await failRetryably(first, 'attempt 1 failed')).effect).toBe('retry');

    let audit = await readAudit(t, runId, 'run.retry_scheduled');
    expect(audit).toHaveLength(1);
    expect(audit[0].data).toMatchObject({ failed_attempt: 1, next_attempt: 2, delay_ms: 1000, failed_at: failedAt1, available_at: failedAt1 + 1000 });
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, availableAt: failedAt1 + 1000, error: { message: 'attempt 1 failed', retryable: true } });
    expect(await readLeases(t, runId)).toEqual([]);

    // 1 ms before available_at: nothing to poll. At available_at: attempt 2.
    t.db.clock.advance(999);
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
    t.db.clock.advance(1);
    const second = await pollAndAck(t);
    expect(second).toMatchObject({ run_id: runId, attempt: 2, execution_seq: 2 });

    // Attempt 2 fails retryably: the delay doubles.
    const failedAt2 = t.db.clock.now();
    expect((await failRetryably(second, 'attempt 2 failed')).effect).toBe('retry');
    audit = await readAudit(t, runId, 'run.retry_scheduled');
    expect(audit).toHaveLength(2);
    expect(audit[1].data).toMatchObject({ failed_attempt: 2, next_attempt: 3, delay_ms: 2000, failed_at: failedAt2, available_at: failedAt2 + 2000 });
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', attempt: 3, availableAt: failedAt2 + 2000 });

    t.db.clock.advance(1999);
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
    t.db.clock.advance(1);
    const third = await pollAndAck(t);
    expect(third).toMatchObject({ run_id: runId, attempt: 3, execution_seq: 3 });

    // Attempt 3 of 3 fails retryably: no attempts left, the run fails with that error.
    expect((await failRetryably(third, 'attempt 3 failed')).effect).toBe('outcome');
    const failed = await readRun(t, runId);
    expect(failed).toMatchObject({ status: 'failed', attempt: 3, maxAttempts: 3, error: { message: 'attempt 3 failed', code: 'ERROR', retryable: true } });
    expect(failed.endedAt).toBe(t.db.clock.now());
    expect(await readAudit(t, runId, 'run.retry_scheduled')).toHaveLength(2);
    expect(await readLeases(t, runId)).toEqual([]);

    t.db.clock.advance(600_000);
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
    await settle(t);
    expect(await outcomesAnnounced(t.engine)).toBe(1);
  });

  it('a non-retryable failure is never retried, whatever attempts are left', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'job.requested', data: {} });
    const job = await pollAndAck(t);
    const result = await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error: { message: 'bad input', retryable: false } }));
    expect(result.effect).toBe('outcome');
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'failed', attempt: 1 });
    expect(await readAudit(t, runIds[0], 'run.retry_scheduled')).toEqual([]);
  });

  it('a retried retry-failure report of the same execution schedules nothing more', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'job.requested', data: {} });
    const job = await pollAndAck(t);
    expect((await failRetryably(job, 'once')).effect).toBe('retry');
    const after = await readRun(t, runIds[0]);
    expect((await failRetryably(job, 'once')).effect).toBe('none');
    expect(await readRun(t, runIds[0])).toEqual(after);
    expect(await readAudit(t, runIds[0], 'run.retry_scheduled')).toHaveLength(1);
  });
});
