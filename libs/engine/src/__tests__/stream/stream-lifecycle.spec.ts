/**
 * Lifecycle of stream jobs on SQLite and PostgreSQL (issue 7): the function timeout applies to a
 * stream execution the worker never reports (item 4), a heartbeat listing a job whose execution is
 * no longer live is answered `stale` with a `cancel` (item 9). The worker is a raw `@grpc/grpc-js`
 * client acting like the v0.29 worker.
 */
import { STORES } from '@ironflow/testing';
import { v1 } from '@ironflow/rpc';
import { RawStreamWorker, SCOPE, startStreamEngine, StreamEngine, uid } from './stream-kit.test';

describe.each(STORES)('stream job lifecycle on %s', (dialect) => {
  let engine: StreamEngine;

  beforeAll(async () => {
    engine = await startStreamEngine(dialect);
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('a stream execution past its function timeout fails with FUNCTION_TIMED_OUT; the worker\'s next heartbeat is answered stale with a cancel', async () => {
    const fnId = uid('stream-timeout');
    const event = uid('slow.event');
    await engine.server.runtime.engine.api.registerFunction(SCOPE, { id: fnId, mode: 'pull', triggers: [{ event }], timeoutMs: 2_000, retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    const workerId = uid('worker-stream');
    const raw = new RawStreamWorker(engine.port);
    try {
      raw.register(workerId, [fnId], 1);
      await raw.next('registered');
      const runId = await engine.trigger(event);
      const job = await raw.next('job');
      raw.send({ payload: { case: 'jobAck', value: { jobId: job.jobId, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
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
});
