/**
 * Contract tests of the streaming transport's fencing (seed "Tests that pin this contract";
 * CONTRACT-TESTS.md #5, #6), on SQLite and PostgreSQL, over real gRPC streams to `startServer`.
 * The workers are raw `@grpc/grpc-js` clients sending what the v0.29 worker sends, so each
 * report's timing is the test's choice. The engine runs on the real NATS JetStream (a namespace of
 * its own), and lease recovery is the real capacity scanner's (`LeaseRecoverySystem`, every 50 ms
 * here): the test moves the store clock past the lease and waits for the scanner's requeue.
 */
import { STORES, waitFor } from '@ironflow/testing';
import { v1 } from '@ironflow/rpc';
import { leaseExpiry, RawStreamWorker, SCOPE, startStreamEngine, StreamEngine, uid } from './stream-kit.test';

const LEASE_MS = 90_000;

describe.each(STORES)('stream fencing on %s', (dialect) => {
  let engine: StreamEngine;
  const workers: RawStreamWorker[] = [];

  beforeAll(async () => {
    engine = await startStreamEngine(dialect, { scanMs: 50 }, { nats: true });
  });

  afterEach(() => {
    for (const w of workers.splice(0)) w.close();
  });

  afterAll(async () => {
    await engine?.close();
  });

  function connectWorker(functionIds: string[], maxConcurrentJobs: number): { raw: RawStreamWorker; workerId: string } {
    const raw = new RawStreamWorker(engine.port);
    workers.push(raw);
    const workerId = uid('worker-stream');
    raw.register(workerId, functionIds, maxConcurrentJobs);
    return { raw, workerId };
  }

  function ack(raw: RawStreamWorker, job: v1.JobAssignment): void {
    raw.send({ payload: { case: 'jobAck', value: { jobId: job.jobId, runId: '', executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
  }

  function complete(raw: RawStreamWorker, job: v1.JobAssignment, output: Record<string, unknown>): void {
    raw.send({ payload: { case: 'jobCompleted', value: { jobId: job.jobId, output: output as never, durationMs: 5, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
  }

  function fail(raw: RawStreamWorker, job: v1.JobAssignment, message: string): void {
    raw.send({
      payload: { case: 'jobFailed', value: { jobId: job.jobId, error: { message, code: 'ERROR', retryable: false }, durationMs: 5, executionSeq: job.executionSeq, leaseToken: job.leaseToken } },
    });
  }

  /**
   * Moves the store clock past the lease and waits until the capacity scanner recovered it: one
   * more `requeued` recovery, and the lease of `executionSeq` gone (the next execution may
   * already hold a lease of its own).
   */
  async function loseLease(runId: string, executionSeq: number): Promise<void> {
    const before = await engine.leaseRecoveries('requeued');
    expect(await leaseExpiry(engine, runId)).toMatchObject({ executionSeq });
    engine.clock.advance(LEASE_MS + 1_000);
    await waitFor(`the scanner requeued run ${runId}`, async () => (await engine.leaseRecoveries('requeued')) === before + 1);
    expect((await leaseExpiry(engine, runId))?.executionSeq).not.toBe(executionSeq);
  }

  it('TestPostCommit_GRPCReportAfterLeaseRecoveryIsDiscarded: a completion or failure sent after the lease was recovered is dropped and counted; the next execution commits', async () => {
    const fnId = uid('recovered');
    const event = uid('recovered.event');
    await engine.registerPullFunction(fnId, event);
    const first = connectWorker([fnId], 1);
    await first.raw.next('registered');
    const runId = await engine.trigger(event);
    const lost = await first.raw.next('job');
    expect(lost.jobId).toBe(`${runId}-1`);
    ack(first.raw, lost);

    await loseLease(runId, 1);
    expect((await engine.getRun(runId)).status).toBe('waiting_for_capacity');

    // The next execution goes to another worker (the first stream still counts its lost job, so
    // it has no room).
    const second = connectWorker([fnId], 1);
    const next = await second.raw.next('job');
    expect(next.jobId).toBe(`${runId}-2`);
    expect(next.executionSeq).toBe(2n);
    expect(next.leaseToken).not.toBe(lost.leaseToken);
    ack(second.raw, next);

    // The first execution finishes late: its completion (judged by its fence) and a failure for
    // it (a job its stream no longer tracks) are both dropped and counted.
    const staleBefore = await engine.staleRejected();
    complete(first.raw, lost, { from: 'first execution' });
    fail(first.raw, lost, 'late failure of the first execution');
    await waitFor('both late reports counted', async () => (await engine.staleRejected()) === staleBefore + 2);
    const untouched = await engine.getRun(runId);
    expect(untouched.status).toBe('running');
    expect(untouched.output).toBeUndefined();
    expect(untouched.error).toBeUndefined();
    expect((await engine.server.runtime.engine.api.getRunSteps(SCOPE, runId)).steps).toEqual([]);
    expect(await leaseExpiry(engine, runId)).toMatchObject({ executionSeq: 2 });

    // The next execution's report still commits.
    complete(second.raw, next, { from: 'second execution' });
    const done = await engine.waitForRun(runId, (r) => r.status === 'completed', `run ${runId} completed`);
    expect(done.output).toEqual({ from: 'second execution' });
    expect(done.attempt).toBe(1);
    expect(await engine.staleRejected()).toBe(staleBefore + 2);
    expect(await leaseExpiry(engine, runId)).toBeUndefined();
    // Nothing more was delivered to the first stream.
    expect(first.raw.unread('job')).toEqual([]);
  });

  it('TestPostCommit_GRPCReportAfterRedeliveryIsDiscarded: the earlier execution\'s report is dropped and counted even before the redelivered execution reports, which then commits', async () => {
    const fnId = uid('redelivered');
    const event = uid('redelivered.event');
    await engine.registerPullFunction(fnId, event);
    // Room for two jobs, so the recovered run comes back on the same stream.
    const { raw } = connectWorker([fnId], 2);
    await raw.next('registered');
    const runId = await engine.trigger(event);
    const earlier = await raw.next('job');
    expect(earlier.jobId).toBe(`${runId}-1`);
    ack(raw, earlier);

    await loseLease(runId, 1);
    const again = await raw.next('job', (j) => j.runId === runId);
    expect(again.jobId).toBe(`${runId}-2`);
    expect(again.executionSeq).toBe(2n);
    expect(again.leaseToken).not.toBe(earlier.leaseToken);
    // The superseded execution is cancelled on the stream.
    const cancel = await raw.next('cancel');
    expect(cancel.jobId).toBe(earlier.jobId);
    ack(raw, again);

    // The earlier execution's reports arrive first, while the new one is still running.
    const staleBefore = await engine.staleRejected();
    complete(raw, earlier, { from: 'earlier execution' });
    fail(raw, earlier, 'late failure of the earlier execution');
    await waitFor('both late reports counted', async () => (await engine.staleRejected()) === staleBefore + 2);
    const running = await engine.getRun(runId);
    expect(running.status).toBe('running');
    expect(running.output).toBeUndefined();
    expect(await leaseExpiry(engine, runId)).toMatchObject({ executionSeq: 2 });

    complete(raw, again, { from: 'redelivered execution' });
    const done = await engine.waitForRun(runId, (r) => r.status === 'completed', `run ${runId} completed`);
    expect(done.output).toEqual({ from: 'redelivered execution' });
    expect(await engine.staleRejected()).toBe(staleBefore + 2);
    expect(await leaseExpiry(engine, runId)).toBeUndefined();
  });

  it('a cancel on NATS reaches the stream at once: the worker gets cancel for its job without a heartbeat', async () => {
    const fnId = uid('cancel-pushed');
    const event = uid('cancel.pushed');
    await engine.registerPullFunction(fnId, event);
    const { raw } = connectWorker([fnId], 2);
    await raw.next('registered');
    const runId = await engine.trigger(event);
    const job = await raw.next('job');
    ack(raw, job);
    await engine.server.runtime.engine.api.cancelRun(SCOPE, runId, 'stop it');
    expect(await raw.next('cancel')).toMatchObject({ jobId: job.jobId, reason: `run ${runId} was cancelled` });
    expect(raw.unread('leaseRefresh')).toEqual([]);
  });
});
