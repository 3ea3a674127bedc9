/**
 * Lifecycle of stream jobs on SQLite and PostgreSQL (issue 7): the function timeout applies to a
 * stream execution the worker never reports (item 4); a stream that closes gives its jobs back at
 * once (item 8); a heartbeat listing a job whose execution is no longer live, or whose lease
 * expired, is answered `stale` with a `cancel` and revives nothing (item 9). The worker is a raw
 * `@grpc/grpc-js` client acting like the v0.29 worker.
 */
import { STORES, waitFor } from '@ironflow/testing';
import { v1 } from '@ironflow/rpc';
import { leaseExpiry, RawStreamWorker, SCOPE, startStreamEngine, StreamEngine, uid } from './stream-kit.test';

describe.each(STORES)('stream job lifecycle on %s', (dialect) => {
  let engine: StreamEngine;

  beforeAll(async () => {
    engine = await startStreamEngine(dialect);
  });

  afterAll(async () => {
    await engine?.close();
  });

  /** Registers `raw` for `fnId`, starts a run of `event` and acks its job, as the v0.29 worker does. */
  async function ackedJob(raw: RawStreamWorker, workerId: string, fnId: string, event: string): Promise<{ runId: string; job: v1.JobAssignment }> {
    raw.register(workerId, [fnId], 1);
    await raw.next('registered');
    const runId = await engine.trigger(event);
    const job = await raw.next('job');
    raw.send({ payload: { case: 'jobAck', value: { jobId: job.jobId, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
    return { runId, job };
  }

  it('a stream execution past its function timeout fails with FUNCTION_TIMED_OUT; the worker\'s next heartbeat is answered stale with a cancel', async () => {
    const fnId = uid('stream-timeout');
    const event = uid('slow.event');
    await engine.server.runtime.engine.api.registerFunction(SCOPE, { id: fnId, mode: 'pull', triggers: [{ event }], timeoutMs: 2_000, retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    const workerId = uid('worker-stream');
    const raw = new RawStreamWorker(engine.port);
    try {
      const { runId, job } = await ackedJob(raw, workerId, fnId, event);
      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 1, jobs: [{ jobId: job.jobId }] } } });
      expect((await raw.next('leaseRefresh')).segments).toEqual([expect.objectContaining({ runId, state: v1.LeaseState.REFRESHED })]);

      engine.clock.advance(2_001);
      const run = await engine.waitForRun(runId, (r) => r.status === 'failed', 'the run to time out');
      expect(run.error).toMatchObject({ code: 'FUNCTION_TIMED_OUT', retryable: true });

      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 1, jobs: [{ jobId: job.jobId }] } } });
      expect((await raw.next('leaseRefresh')).segments).toEqual([expect.objectContaining({ runId, state: v1.LeaseState.STALE })]);
      expect((await raw.next('cancel')).jobId).toBe(job.jobId);
    } finally {
      raw.close();
    }
  });

  it('a worker that closes its stream gives its acked job back at once: queued again (one give-back toward the recovery ceiling), and the next stream runs it', async () => {
    const fnId = uid('stream-close');
    const event = uid('close.event');
    await engine.registerPullFunction(fnId, event);
    const first = new RawStreamWorker(engine.port);
    const second = new RawStreamWorker(engine.port);
    try {
      const { runId } = await ackedJob(first, uid('worker-stream'), fnId, event);
      // The worker process dies (SIGTERM, no handler): its connection goes away.
      first.close();

      second.register(uid('worker-stream'), [fnId], 1);
      await second.next('registered');
      const again = await second.next('job', (j) => j.runId === runId);
      expect(again.executionSeq).toBe(2n);
      expect(again.attempt).toBe(1);
      second.send({ payload: { case: 'jobAck', value: { jobId: again.jobId, executionSeq: again.executionSeq, leaseToken: again.leaseToken } } });
      second.send({ payload: { case: 'jobCompleted', value: { jobId: again.jobId, output: { by: 'second' }, executionSeq: again.executionSeq, leaseToken: again.leaseToken } } });
      const run = await engine.waitForRun(runId, (r) => r.status === 'completed', 'the second worker to complete the run');
      expect(run.output).toEqual({ by: 'second' });
      const rows = await engine.server.runtime.store.read('t', (tx) => tx.query<{ recoveries: unknown; execution_seq: unknown }>(`SELECT recoveries, execution_seq FROM runs WHERE id = $1`, [runId]));
      expect(rows.map((r) => [Number(r.recoveries), Number(r.execution_seq)])).toEqual([[1, 2]]);
    } finally {
      first.close();
      second.close();
    }
  });

  it('a user cancel reaches the stream at once (cancel, no heartbeat needed); the freed room takes the next job, and the late report is dropped as stale', async () => {
    const fnId = uid('stream-cancel');
    const event = uid('cancel.event');
    await engine.registerPullFunction(fnId, event);
    const workerId = uid('worker-stream');
    const raw = new RawStreamWorker(engine.port);
    try {
      const { runId, job } = await ackedJob(raw, workerId, fnId, event);
      const queued = await engine.trigger(event);
      await engine.server.runtime.engine.api.cancelRun(SCOPE, runId, 'customer called');
      const cancel = await raw.next('cancel');
      expect(cancel).toMatchObject({ jobId: job.jobId, reason: `run ${runId} was cancelled` });
      expect(raw.unread('leaseRefresh')).toEqual([]);
      // The connection held one job (max 1): the cancel freed its room.
      expect((await raw.next('job')).runId).toBe(queued);

      const stale = await engine.staleRejected();
      raw.send({ payload: { case: 'jobCompleted', value: { jobId: job.jobId, output: { late: true }, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
      await waitFor('the late report dropped as stale', async () => (await engine.staleRejected()) > stale);
      expect(await engine.getRun(runId)).toMatchObject({ status: 'cancelled', error: { code: 'CANCELLED', message: 'customer called' } });
    } finally {
      raw.close();
    }
  });

  it('a heartbeat after the lease expired does not revive it: answered stale with a cancel, expiry unchanged', async () => {
    const fnId = uid('stream-expired');
    const event = uid('expired.event');
    await engine.registerPullFunction(fnId, event);
    const workerId = uid('worker-stream');
    const raw = new RawStreamWorker(engine.port);
    try {
      const { runId, job } = await ackedJob(raw, workerId, fnId, event);
      const before = await leaseExpiry(engine, runId);
      // Past the lease, before the scanner's next pass could recover it.
      engine.clock.advance(engine.server.runtime.settings.leaseMs + 1);
      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 1, jobs: [{ jobId: job.jobId }] } } });
      expect((await raw.next('leaseRefresh')).segments).toEqual([expect.objectContaining({ runId, state: v1.LeaseState.STALE })]);
      expect((await raw.next('cancel')).jobId).toBe(job.jobId);
      // The expired execution's lease is unchanged or gone; the scanner may since have recovered the
      // run and a later execution hold a lease of its own.
      const after = await leaseExpiry(engine, runId);
      if (after?.executionSeq === before!.executionSeq) expect(after.expiresAt).toBe(before!.expiresAt);
      else if (after) expect(after.executionSeq).toBeGreaterThan(before!.executionSeq);
    } finally {
      raw.close();
    }
  });
});
