/**
 * `ironflow.v1.WorkerService/Connect` end to end over a real HTTP/2 connection to `startServer`
 * (WIRE-PROTOCOL.md section 4, DESIGN.md "Wire protocols"), on SQLite and PostgreSQL:
 * - our SDK's stream worker (`createWorker({ transport: 'stream' })`, gRPC via @grpc/grpc-js)
 *   runs a run with steps, a sleep and a child invoke to completion, reporting yields with
 *   `job_yielded` and memoized steps with its completions;
 * - a raw gRPC client acting like the v0.29 worker (register, ack, a heartbeat that drops the job
 *   with no report, which is what it does on a yield) gets its run failed at once with
 *   `STREAM_YIELD_UNSUPPORTED`, and its job-id-only heartbeats refresh leases.
 */
import { create } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { createFunction, createStreamWorker, createWorker } from '@ironflow/sdk';
import { STORES, waitFor } from '@ironflow/testing';
import { v1 } from '@ironflow/rpc';
import { leaseExpiry, Pushable, RawStreamWorker, SCOPE, startStreamEngine, StreamEngine, uid } from './stream-kit.test';

describe.each(STORES)('worker stream on %s', (dialect) => {
  let engine: StreamEngine;

  beforeAll(async () => {
    engine = await startStreamEngine(dialect);
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('our SDK stream worker runs steps, a sleep and a child invoke to completion, each step once', async () => {
    const parentId = uid('stream-parent');
    const childId = uid('stream-child');
    const event = uid('order.placed');
    const calls = { first: 0, list: 0, child: 0 };
    const child = createFunction({ id: childId }, async ({ event: e }) => {
      calls.child++;
      return { doubled: (e.data as { n: number }).n * 2 };
    });
    const parent = createFunction({ id: parentId, triggers: [{ event }] }, async ({ step }) => {
      // A number and an array: non-object outputs must survive the Struct-only stream exactly.
      const first = await step.run('first', () => {
        calls.first++;
        return 21;
      });
      await step.sleep('nap', 200);
      const invoked = await step.invoke<{ doubled: number }>(childId, { n: first });
      const list = await step.run('list', () => {
        calls.list++;
        return [first, invoked.doubled];
      });
      return { first, invoked, list };
    });
    const worker = createWorker({ transport: 'stream', serverUrl: engine.url, functions: [parent, child], maxConcurrentJobs: 4, logger: quietLogger });
    await worker.start();
    try {
      const runId = await engine.trigger(event, { order: 7 });
      const run = await engine.waitForRun(runId, (r) => r.status === 'completed' || r.status === 'failed', `run ${runId} to end`, 20_000);

      expect(run.status).toBe('completed');
      expect(run.output).toEqual({ first: 21, invoked: { doubled: 42 }, list: [21, 42] });
      // Three segments (start → sleep, wake → invoke, child done → end); memoized steps never re-ran.
      expect(calls).toEqual({ first: 1, list: 1, child: 1 });

      const { steps, children } = await engine.server.runtime.engine.api.getRunSteps(SCOPE, runId);
      const byName = Object.fromEntries(steps.map((s) => [s.name, s]));
      expect(Object.keys(byName).sort()).toEqual([childId, 'first', 'list', 'nap'].sort());
      expect(byName.first).toMatchObject({ id: `${runId}:first:0`, type: 'run', status: 'completed', output: 21 });
      expect(byName.nap).toMatchObject({ id: `${runId}:nap:0`, type: 'sleep', status: 'completed' });
      expect(byName[childId]).toMatchObject({ type: 'invoke', status: 'completed', output: { doubled: 42 } });
      expect(byName.list).toMatchObject({ type: 'run', status: 'completed', output: [21, 42] });
      expect(children).toHaveLength(1);
      expect(children[0]).toMatchObject({ functionId: childId, status: 'completed', output: { doubled: 42 }, executionMode: 'pull' });
      expect(await engine.staleRejected()).toBe(0);
    } finally {
      await worker.stop();
    }
  });

  it('a v0.29-style worker that acks a job and drops it from its heartbeat without a report fails the run at once with STREAM_YIELD_UNSUPPORTED', async () => {
    const fnId = uid('v029-yields');
    const event = uid('thing.happened');
    await engine.registerPullFunction(fnId, event);
    const workerId = uid('worker-stream');
    const raw = new RawStreamWorker(engine.port);
    try {
      raw.register(workerId, [fnId], 1);
      const registered = await raw.next('registered');
      expect(registered).toMatchObject({ workerId, heartbeatIntervalMs: 30_000 });

      const runId = await engine.trigger(event, { k: 'v' });
      const job = await raw.next('job');
      expect(job.jobId).toBe(`${runId}-1`);
      expect(job.runId).toBe(runId);
      expect(job.functionId).toBe(fnId);
      expect(job.executionSeq).toBe(1n);
      expect(job.leaseToken).not.toBe('');
      expect(job.attempt).toBe(1);
      expect(job.event?.name).toBe(event);
      expect(job.event?.data).toEqual({ k: 'v' });
      expect(job.completedSteps).toEqual([]);
      expect(job.leaseExpiresAt).toBeDefined();

      // v0.29: ack echoes the fence with `run_id` left empty.
      raw.send({ payload: { case: 'jobAck', value: { jobId: job.jobId, runId: '', executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });

      // A heartbeat listing only `job_id` refreshes the lease by job id.
      const before = await leaseExpiry(engine, runId);
      engine.clock.advance(1_000);
      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 1, jobs: [{ jobId: job.jobId }] } } });
      const refreshed = await raw.next('leaseRefresh');
      expect(refreshed.segments).toEqual([expect.objectContaining({ runId, executionSeq: 1n, state: v1.LeaseState.REFRESHED })]);
      const after = await leaseExpiry(engine, runId);
      expect(after?.executionSeq).toBe(1);
      expect(after!.expiresAt - before!.expiresAt).toBeGreaterThanOrEqual(1_000);
      expect((await engine.getRun(runId)).status).toBe('running');

      // The v0.29 worker yields: the job leaves its active set and nothing is sent.
      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 0, jobs: [] } } });
      const answer = await raw.next('leaseRefresh');
      expect(answer.segments).toEqual([]);
      // The heartbeat's answer comes after the failure committed: no lease period, no recovery.
      const run = await engine.getRun(runId);
      expect(run.status).toBe('failed');
      expect(run.attempt).toBe(1);
      expect(run.error).toMatchObject({ code: 'STREAM_YIELD_UNSUPPORTED', retryable: false });
      expect(run.error?.message).toContain(job.jobId);
      expect(await leaseExpiry(engine, runId)).toBeUndefined();

      // A report the worker might still send for it is stale: dropped and counted.
      const stale = await engine.staleRejected();
      raw.send({ payload: { case: 'jobCompleted', value: { jobId: job.jobId, output: { late: true }, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 0, jobs: [] } } });
      await raw.next('leaseRefresh');
      expect(await engine.staleRejected()).toBe(stale + 1);
      expect((await engine.getRun(runId)).status).toBe('failed');
    } finally {
      raw.close();
    }
  });

  it('the Connect protocol (binary protobuf over HTTP/2, what the v0.29 SDK speaks) gets the same stream: register, job, ack, completion', async () => {
    const fnId = uid('connect-proto');
    const event = uid('connect.event');
    await engine.registerPullFunction(fnId, event);
    const transport = createConnectTransport({ baseUrl: engine.url, httpVersion: '2', useBinaryFormat: true });
    const requests = new Pushable<v1.WorkerMessage>();
    const abort = new AbortController();
    const responses = createClient(v1.WorkerService, transport).connect(requests, { signal: abort.signal })[Symbol.asyncIterator]();
    const workerId = uid('worker-stream');
    try {
      requests.push(create(v1.WorkerMessageSchema, { payload: { case: 'register', value: { workerId, hostname: 'h', functionIds: [fnId], maxConcurrentJobs: 10, version: { sdk: '0.29.0', runtime: 'node' } } } }));
      const registered = (await responses.next()).value as v1.EngineMessage;
      expect(registered.payload).toMatchObject({ case: 'registered', value: { workerId, heartbeatIntervalMs: 30_000 } });

      const runId = await engine.trigger(event, { n: 1 });
      const message = (await responses.next()).value as v1.EngineMessage;
      expect(message.payload.case).toBe('job');
      const job = message.payload.value as v1.JobAssignment;
      expect(job.jobId).toBe(`${runId}-1`);
      requests.push(create(v1.WorkerMessageSchema, { payload: { case: 'jobAck', value: { jobId: job.jobId, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } }));
      requests.push(create(v1.WorkerMessageSchema, { payload: { case: 'jobCompleted', value: { jobId: job.jobId, output: { ok: true }, durationMs: 3, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } }));
      const run = await engine.waitForRun(runId, (r) => r.status === 'completed', `run ${runId} completed`);
      expect(run.output).toEqual({ ok: true });
    } finally {
      requests.close();
      abort.abort();
    }
  });

  it('our SDK worker refreshes leases with the fence in its heartbeats, and a cancelled run aborts its handler through lease_refresh / cancel', async () => {
    const fnId = uid('long-runner');
    const event = uid('long.event');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let signal: AbortSignal | undefined;
    const fn = createFunction({ id: fnId, triggers: [{ event }] }, async ({ step, signal: s }) => {
      signal = s;
      await step.run('wait', () => released);
      return { done: true };
    });
    const worker = createStreamWorker({ serverUrl: engine.url, functions: [fn], heartbeatIntervalMs: 50, logger: quietLogger });
    await worker.start();
    try {
      const runId = await engine.trigger(event);
      await waitFor('handler started', () => signal !== undefined);
      const first = await waitFor('a lease', () => leaseExpiry(engine, runId));
      engine.clock.advance(5_000);
      // The next heartbeats move the lease with the store clock: refreshed by fence, not by job id alone.
      const later = await waitFor('lease refreshed', async () => {
        const l = await leaseExpiry(engine, runId);
        return l && l.expiresAt >= first.expiresAt + 5_000 ? l : undefined;
      });
      expect(later.executionSeq).toBe(1);

      await engine.server.runtime.engine.api.cancelRun(SCOPE, runId, 'test cancel');
      await waitFor('handler aborted', () => signal!.aborted);
      release();
      const run = await engine.waitForRun(runId, (r) => r.status === 'cancelled', `run ${runId} cancelled`);
      expect(run.output).toBeUndefined();
    } finally {
      release();
      await worker.stop();
    }
  });

  it('an assignment the worker never acks and leaves out of two heartbeats is forgotten: the stream gets its next job', async () => {
    const fnId = uid('never-acked');
    const event = uid('never.event');
    await engine.registerPullFunction(fnId, event);
    const workerId = uid('worker-stream');
    const raw = new RawStreamWorker(engine.port);
    try {
      raw.register(workerId, [fnId], 1);
      await raw.next('registered');
      const dropped = await engine.trigger(event);
      const lost = await raw.next('job');
      expect(lost.runId).toBe(dropped);
      const second = await engine.trigger(event);
      // At capacity (one tracked job): the second run waits.
      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 0, jobs: [] } } });
      await raw.next('leaseRefresh');
      expect(raw.unread('job')).toEqual([]);
      expect((await engine.getRun(second)).status).toBe('waiting_for_capacity');
      // The second heartbeat without it: dropped by the worker (v0.29 ignores jobs beyond its capacity).
      raw.send({ payload: { case: 'heartbeat', value: { workerId, activeJobs: 0, jobs: [] } } });
      await raw.next('leaseRefresh');
      const next = await raw.next('job');
      expect(next.runId).toBe(second);
      // The unacked one is not failed: its lease is left to expire and recovery queues it again.
      expect((await engine.getRun(dropped)).status).toBe('running');
      expect(await leaseExpiry(engine, dropped)).toMatchObject({ executionSeq: 1 });
    } finally {
      raw.close();
    }
  });

  it('a stream whose first message is not register ends with invalid_argument', async () => {
    const raw = new RawStreamWorker(engine.port);
    try {
      raw.send({ payload: { case: 'heartbeat', value: { workerId: 'w', activeJobs: 0, jobs: [] } } });
      const status = await waitFor('stream status', () => raw.status);
      expect(status.code).toBe(3); // INVALID_ARGUMENT
      expect(status.details).toContain('register');
    } finally {
      raw.close();
    }
  });
});

const quietLogger = { warn: () => undefined, error: (message: string, fields?: Record<string, unknown>) => console.error(message, fields) };
