import type { JobAssignment } from '@ironflow/contracts';
import { createHash } from 'node:crypto';
import { IronflowClientError } from './errors';
import { createFunction, Handler } from './function';
import { FakeReply, FakeServer, RecordedRequest, deferred, startFakeServer, waitFor } from './testing/fake-server';
import { Worker, WorkerOptions, createWorker } from './worker';

const silent = { warn: () => undefined, error: () => undefined };
const EVENT = { id: 'evt-1', name: 'order.created', data: { orderId: 'o-1', qty: 2 }, timestamp: '2025-01-01T00:00:00.000Z' };

function job(overrides: Partial<JobAssignment> = {}): JobAssignment {
  return { job_id: 'run-1-3', run_id: 'run-1', function_id: 'orders', attempt: 1, event: EVENT, completed_steps: [], ...overrides };
}

/**
 * A fake engine: answers R1/R2/R3 with 200, hands out `polls` one per GET (then 204),
 * and answers acks and updates through the given functions (default 200).
 */
interface EngineScript {
  polls?: FakeReply[];
  registerFunction?: (req: RecordedRequest) => FakeReply;
  register?: (req: RecordedRequest) => FakeReply;
  ack?: (req: RecordedRequest) => FakeReply;
  update?: (req: RecordedRequest) => FakeReply;
}

async function startEngine(script: EngineScript): Promise<FakeServer> {
  const polls = [...(script.polls ?? [])];
  return startFakeServer((req) => {
    if (req.path === '/ironflow.v1.IronflowService/RegisterFunction') return script.registerFunction?.(req) ?? { status: 200, body: { created: true } };
    if (/^\/api\/v1\/workers\/[^/]+\/register$/.test(req.path)) return script.register?.(req) ?? { status: 200, body: {} };
    if (/^\/api\/v1\/workers\/[^/]+\/heartbeat$/.test(req.path)) return { status: 200, body: {} };
    if (req.method === 'GET' && /^\/api\/v1\/workers\/[^/]+\/jobs$/.test(req.path)) return polls.shift() ?? { status: 204 };
    if (req.method === 'PUT' && req.path.endsWith('/ack')) return script.ack?.(req) ?? { status: 200, body: {} };
    if (req.method === 'PUT' && /\/jobs\/[^/]+$/.test(req.path)) return script.update?.(req) ?? { status: 200, body: {} };
    return { status: 404, body: { code: 'not_found', message: req.path } };
  });
}

const updates = (engine: FakeServer) => engine.requests.filter((r) => r.method === 'PUT' && !r.path.endsWith('/ack'));
const acks = (engine: FakeServer) => engine.requests.filter((r) => r.path.endsWith('/ack'));
const polls = (engine: FakeServer) => engine.requests.filter((r) => r.method === 'GET');
const terminal = (engine: FakeServer) => updates(engine).find((r) => r.body?.status !== 'progress');
const terminals = (engine: FakeServer) => updates(engine).filter((r) => r.body?.status !== 'progress');
const activeJobs = (w: Worker) => (w as unknown as { active: Map<string, unknown> }).active.size;

describe('createWorker (REST pull)', () => {
  let engine: FakeServer;
  let worker: Worker | undefined;

  const start = async (fns: WorkerOptions['functions'], options: Partial<WorkerOptions> = {}) => {
    worker = createWorker({
      serverUrl: `${engine.url}/`,
      functions: fns,
      logger: silent,
      pollIntervalMs: 10,
      reconnectDelayMs: 10,
      pollErrorDelayMs: 10,
      heartbeatIntervalMs: 60_000,
      checkpointIntervalMs: 0,
      ...options,
    });
    await worker.start();
    return worker;
  };

  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    await engine?.close();
  });

  it('registers, polls, acks before user code and completes with the fence echoed', async () => {
    const calls: string[] = [];
    const handler: Handler = async ({ event, step, run }) => {
      calls.push('handler');
      const loaded = await step.run('load', () => (calls.push('load'), { n: 0 }));
      const doubled = await step.run('double', () => (calls.push('double'), (loaded as { n: number }).n * 2));
      return { doubled, orderId: (event.data as { orderId: string }).orderId, attempt: run.attempt };
    };
    const orders = createFunction({ id: 'orders', triggers: [{ event: 'order.created' }], retry: { maxAttempts: 5 }, metadata: { team: 'a' } }, handler);
    const assignment = job({
      attempt: 2,
      completed_steps: [{ step_id: 'run-1:load:0', name: 'load', output: { n: 21 } }],
      step_sequence_base: 4,
      execution_seq: 3,
      lease_token: 'tok-abc',
    });
    engine = await startEngine({
      polls: [{ status: 200, body: { jobs: [assignment] } }],
      ack: () => {
        calls.push('ack');
        return { status: 200, body: {} };
      },
    });
    const w = await start([orders], { apiKey: 'key-1', environment: 'staging', maxConcurrentJobs: 2, labels: { zone: 'eu' } });

    const done = await waitFor(() => terminal(engine), 'terminal update');
    expect(calls).toEqual(['ack', 'handler', 'double']);

    const [r1, r2, r4] = engine.requests;
    expect(r1.method).toBe('POST');
    expect(r1.path).toBe('/ironflow.v1.IronflowService/RegisterFunction');
    expect(r1.body).toEqual({
      id: 'orders',
      name: 'orders',
      triggers: [{ event: 'order.created' }],
      retry: { maxAttempts: 5 },
      preferredMode: 'EXECUTION_MODE_PULL',
      metadata: { team: 'a', __ironflow_code_hash: createHash('sha256').update(handler.toString()).digest('hex').slice(0, 16) },
    });
    expect(r1.body.metadata.__ironflow_code_hash).toMatch(/^[0-9a-f]{16}$/);
    for (const r of engine.requests) {
      expect(r.headers['authorization']).toBe('Bearer key-1');
      expect(r.headers['x-ironflow-environment']).toBe('staging');
      expect(r.headers['content-type']).toBe('application/json');
    }

    expect(w.workerId).toMatch(/^worker-[0-9a-z]+-[0-9a-z]{6}$/);
    expect(r2.method).toBe('POST');
    expect(r2.path).toBe(`/api/v1/workers/${w.workerId}/register`);
    expect(r2.body).toEqual({
      worker_id: w.workerId,
      hostname: process.env.HOSTNAME || 'unknown',
      function_ids: ['orders'],
      max_concurrent_jobs: 2,
      labels: { zone: 'eu' },
      version: { sdk: expect.any(String), runtime: `node-${process.version}` },
    });

    expect(r4.method).toBe('GET');
    expect(r4.path).toBe(`/api/v1/workers/${w.workerId}/jobs`);
    expect(r4.query.get('available')).toBe('2');

    const [ack] = acks(engine);
    expect(ack.path).toBe(`/api/v1/workers/${w.workerId}/jobs/run-1-3/ack`);
    expect(ack.body).toEqual({ run_id: 'run-1', execution_seq: 3, lease_token: 'tok-abc' });

    expect(done.path).toBe(`/api/v1/workers/${w.workerId}/jobs/run-1-3`);
    expect(done.body).toEqual({
      status: 'completed',
      output: { doubled: 42, orderId: 'o-1', attempt: 2 },
      steps: [expect.objectContaining({ id: 'run-1:double:0', name: 'double', type: 'invoke', status: 'completed', output: 42 })],
      step_offset: 4,
      execution_seq: 3,
      lease_token: 'tok-abc',
    });
    expect(updates(engine)).toHaveLength(1);
  });

  it('drops a job whose ack is refused with 409: no user code, no terminal update', async () => {
    let ran = 0;
    const fn = createFunction({ id: 'orders' }, async () => {
      ran++;
      return 'never';
    });
    engine = await startEngine({
      polls: [{ status: 200, body: { jobs: [job({ execution_seq: 1, lease_token: 'stale' })] } }],
      ack: () => ({ status: 409, body: { code: 'STALE_EXECUTION', message: 'superseded' } }),
    });
    const w = await start([fn]);

    await waitFor(() => acks(engine).length === 1, 'the ack');
    // The job entered the active set before its ack; once it has left, its task is over.
    await waitFor(() => (w as unknown as { active: Map<string, unknown> }).active.size === 0, 'the job to leave the worker');
    expect(ran).toBe(0);
    expect(updates(engine)).toEqual([]);
  });

  it('heartbeats list the active jobs with their start time', async () => {
    const gate = deferred();
    const fn = createFunction({ id: 'orders' }, async () => gate.promise);
    engine = await startEngine({ polls: [{ status: 200, body: job() }] });
    const w = await start([fn], { heartbeatIntervalMs: 15 });
    const beat = await waitFor(() => engine.requests.find((r) => r.path.endsWith('/heartbeat') && r.body.active_jobs === 1), 'a heartbeat with the job');
    expect(beat.path).toBe(`/api/v1/workers/${w.workerId}/heartbeat`);
    expect(beat.body).toEqual({ worker_id: w.workerId, active_jobs: 1, jobs: [{ job_id: 'run-1-3', started_at: expect.any(String) }] });
    expect(Date.parse(beat.body.jobs[0].started_at)).not.toBeNaN();
    gate.resolve();
    await waitFor(() => terminal(engine), 'terminal update');
  });

  it('on a yield flushes the steps as progress first, then sends yielded without steps', async () => {
    const fn = createFunction({ id: 'orders' }, async ({ step }) => {
      await step.run('a', () => 'A');
      await step.run('b', () => 'B');
      await step.sleep('nap', '1h');
    });
    engine = await startEngine({ polls: [{ status: 200, body: { jobs: [job({ step_sequence_base: 9, execution_seq: 5, lease_token: 'tok' })] } }] });
    await start([fn], { checkpointIntervalMs: 60_000 });

    const yielded = await waitFor(() => terminal(engine), 'yielded update');
    const [progress] = updates(engine);
    expect(progress.body).toEqual({
      status: 'progress',
      steps: [expect.objectContaining({ id: 'run-1:a:0', output: 'A' }), expect.objectContaining({ id: 'run-1:b:0', output: 'B' })],
      step_offset: 9,
      execution_seq: 5,
      lease_token: 'tok',
    });
    expect(yielded.body).toEqual({
      status: 'yielded',
      yield: { type: 'sleep', step_id: 'run-1:nap:0', until: expect.any(String) },
      execution_seq: 5,
      lease_token: 'tok',
      sent_at: expect.any(String),
    });
    // The send time is this worker's clock as it sent the update.
    expect(Math.abs(Date.parse(yielded.body.sent_at) - yielded.at)).toBeLessThan(60_000);
    expect(updates(engine)).toHaveLength(2);
  });

  it('accepts a bare (legacy) assignment: no ack, no fence, debounced progress then the tail', async () => {
    const progressSeen = deferred();
    const fn = createFunction({ id: 'orders' }, async ({ step }) => {
      await step.run('a', () => 1);
      await progressSeen.promise;
      await step.run('b', () => 2);
      return 'ok';
    });
    engine = await startEngine({
      polls: [{ status: 200, body: job() }],
      update: (req) => {
        if (req.body.status === 'progress') progressSeen.resolve();
        return { status: 200, body: {} };
      },
    });
    await start([fn], { checkpointIntervalMs: 10 });

    const done = await waitFor(() => terminal(engine), 'completed update');
    expect(acks(engine)).toEqual([]);
    const [progress] = updates(engine);
    expect(progress.body).toEqual({ status: 'progress', steps: [expect.objectContaining({ id: 'run-1:a:0' })], step_offset: 0 });
    expect(done.body).toEqual({ status: 'completed', output: 'ok', steps: [expect.objectContaining({ id: 'run-1:b:0' })], step_offset: 1 });
  });

  it('fails a job for an unknown function at once, without an ack, echoing the fence', async () => {
    const fn = createFunction({ id: 'orders' }, async () => 'x');
    engine = await startEngine({ polls: [{ status: 200, body: { jobs: [job({ function_id: 'ghost', execution_seq: 2, lease_token: 't2' })] } }] });
    await start([fn]);
    const failed = await waitFor(() => terminal(engine), 'failed update');
    expect(acks(engine)).toEqual([]);
    expect(failed.body).toEqual({
      status: 'failed',
      error: { message: expect.stringContaining('ghost'), code: 'FUNCTION_NOT_FOUND', retryable: false },
      execution_seq: 2,
      lease_token: 't2',
    });
  });

  it('skips invalid assignments and reports a plain error as retryable over pull, with the unflushed steps', async () => {
    const fn = createFunction({ id: 'orders' }, async ({ step }) => {
      await step.run('a', () => 1);
      throw new Error('downstream unavailable');
    });
    const invalid = { ...job({ job_id: 'bad' }), completed_steps: null };
    engine = await startEngine({ polls: [{ status: 200, body: { jobs: [invalid, job()] } }] });
    await start([fn]);
    const failed = await waitFor(() => terminal(engine), 'failed update');
    expect(failed.path.endsWith('/jobs/run-1-3')).toBe(true);
    expect(failed.body).toEqual({
      status: 'failed',
      error: { message: 'downstream unavailable', code: 'ERROR', retryable: true },
      steps: [expect.objectContaining({ id: 'run-1:a:0' })],
      step_offset: 0,
    });
    expect(engine.requests.some((r) => r.path.includes('/jobs/bad'))).toBe(false);
  });

  it('registers again when a poll answers 404', async () => {
    const fn = createFunction({ id: 'orders' }, async () => 'x');
    engine = await startEngine({ polls: [{ status: 404, body: { code: 'WORKER_NOT_FOUND', message: 'unknown worker' } }] });
    await start([fn]);
    await waitFor(() => polls(engine).length >= 2, 'a poll after the second registration');
    const paths = engine.requests.map((r) => r.path.replace(/worker-[^/]+/, 'W'));
    expect(paths.slice(0, 6)).toEqual([
      '/ironflow.v1.IronflowService/RegisterFunction',
      '/api/v1/workers/W/register',
      '/api/v1/workers/W/jobs',
      '/ironflow.v1.IronflowService/RegisterFunction',
      '/api/v1/workers/W/register',
      '/api/v1/workers/W/jobs',
    ]);
  });

  it('retries registration after a server error and stops for good on 401', async () => {
    let attempts = 0;
    engine = await startEngine({
      registerFunction: () => (++attempts === 1 ? { status: 503, body: { code: 'unavailable', message: 'starting' } } : { status: 401, body: { code: 'unauthenticated', message: 'bad key' } }),
    });
    const fn = createFunction({ id: 'orders' }, async () => 'x');
    const failure = await start([fn]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(IronflowClientError);
    expect(failure).toMatchObject({ status: 401, code: 'unauthenticated' });
    expect(attempts).toBe(2);
    expect(polls(engine)).toEqual([]);
  });

  it.each([
    [400, 'invalid_argument', 'VALIDATION_ERROR'],
    [404, 'not_found', 'FUNCTION_NOT_FOUND'],
    [429, 'resource_exhausted', 'PAYLOAD_TOO_LARGE'],
  ])('start() rejects at once on a permanent refusal (%i) instead of registering again', async (status, code, ironflowCode) => {
    let attempts = 0;
    engine = await startEngine({
      registerFunction: () => (++attempts, { status, body: { code, message: 'refused for good', ironflowCode } }),
    });
    const fn = createFunction({ id: 'orders' }, async () => 'x');
    const failure = await start([fn]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ name: 'IronflowClientError', status, code, engineCode: ironflowCode });
    expect(attempts).toBe(1);
    expect(polls(engine)).toEqual([]);
  });

  it('drain stops polling and waits for the active job to report', async () => {
    const gate = deferred();
    const fn = createFunction({ id: 'orders' }, async () => {
      await gate.promise;
      return 'drained';
    });
    engine = await startEngine({ polls: [{ status: 200, body: job() }] });
    const w = await start([fn]);
    await waitFor(() => (w as unknown as { active: Map<string, unknown> }).active.size === 1, 'the job to start');
    let drained = false;
    const draining = w.drain().then(() => (drained = true));
    await new Promise((r) => setImmediate(r));
    const pollsAtDrain = polls(engine).length;
    expect(drained).toBe(false);
    gate.resolve();
    await draining;
    expect(terminal(engine)?.body).toEqual({ status: 'completed', output: 'drained', steps: [], step_offset: 0 });
    expect(polls(engine).length).toBeLessThanOrEqual(pollsAtDrain + 1);
  });

  it('stop aborts the handler signal and gives the job back: one release with the fence, no terminal update', async () => {
    const started = deferred();
    const fn = createFunction({ id: 'orders' }, async ({ signal }) => {
      started.resolve();
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    });
    engine = await startEngine({ polls: [{ status: 200, body: job({ execution_seq: 1, lease_token: 't' }) }] });
    const w = await start([fn]);
    await started.promise;
    await w.stop();
    await waitFor(() => (w as unknown as { active: Map<string, unknown> }).active.size === 0, 'the job to end');
    const sent = updates(engine);
    expect(sent.map((r) => r.path)).toEqual([`/api/v1/workers/${w.workerId}/jobs/run-1-3/release`]);
    expect(sent[0].body).toEqual({ run_id: 'run-1', execution_seq: 1, lease_token: 't' });
    await expect(w.start()).rejects.toMatchObject({ code: 'WORKER_STOPPED' });
  });

  it('stop flushes the job\'s unsent checkpoints before the release, and a handler that still returns sends no terminal', async () => {
    const gate = deferred();
    const stepDone = deferred();
    const fn = createFunction({ id: 'orders' }, async ({ step }) => {
      await step.run('a', () => 'A');
      stepDone.resolve();
      await gate.promise;
      return 'too late';
    });
    engine = await startEngine({ polls: [{ status: 200, body: job({ execution_seq: 2, lease_token: 't2', step_sequence_base: 4 }) }] });
    const w = await start([fn], { checkpointIntervalMs: 60_000 });
    await waitFor(() => activeJobs(w) === 1 && acks(engine).length === 1, 'the job to run');
    // Step `a` is done and its checkpoint unsent (the interval is a minute): what stop must flush.
    await stepDone.promise;
    expect(updates(engine)).toEqual([]);
    const stopping = w.stop();
    gate.resolve();
    await stopping;
    await waitFor(() => activeJobs(w) === 0, 'the job to end');
    const sent = updates(engine);
    expect(sent.map((r) => (r.path.endsWith('/release') ? 'release' : r.body.status))).toEqual(['progress', 'release']);
    expect(sent[0].body).toEqual({ status: 'progress', steps: [expect.objectContaining({ id: 'run-1:a:0', output: 'A' })], step_offset: 4, execution_seq: 2, lease_token: 't2' });
  });

  it('a job a heartbeat answers `lost` is aborted and sends no terminal update', async () => {
    const started = deferred();
    let aborted = false;
    const fn = createFunction({ id: 'orders' }, async ({ signal }) => {
      started.resolve();
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => ((aborted = true), resolve())));
      return 'done anyway';
    });
    engine = await startFakeServer((req) => {
      if (req.path.endsWith('/heartbeat')) return { status: 200, body: { ok: true, jobs: (req.body.jobs as { job_id: string }[]).map((j) => ({ job_id: j.job_id, state: 'lost' })) } };
      if (req.method === 'GET' && req.path.endsWith('/jobs')) return polled++ === 0 ? { status: 200, body: { jobs: [job({ execution_seq: 1, lease_token: 't' })] } } : { status: 204 };
      return { status: 200, body: {} };
    });
    let polled = 0;
    const w = await start([fn], { heartbeatIntervalMs: 30 });
    await started.promise;
    await waitFor(() => aborted && activeJobs(w) === 0, 'the lost job to end');
    expect(updates(engine)).toEqual([]);
  });

  it('a job whose checkpoint is refused 409 (its run cancelled, its execution recovered) is aborted without waiting for a heartbeat: no further step runs, no terminal update', async () => {
    let aborted = false;
    let ranB = false;
    const fn = createFunction({ id: 'orders' }, async ({ step, signal }) => {
      await step.run('a', () => 'A');
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => ((aborted = true), resolve())));
      await step.run('b', () => ((ranB = true), 'B'));
      return 'done';
    });
    engine = await startEngine({
      polls: [{ status: 200, body: { jobs: [job({ execution_seq: 1, lease_token: 't' })] } }],
      update: (req) => (req.body?.status === 'progress' ? { status: 409, body: { code: 'RUN_NOT_RUNNING', message: 'run run-1 is cancelled' } } : { status: 200, body: {} }),
    });
    const w = await start([fn], { checkpointIntervalMs: 10 });
    await waitFor(() => aborted && activeJobs(w) === 0, 'the refused job to end');
    expect(ranB).toBe(false);
    expect(terminals(engine)).toEqual([]);
    expect(updates(engine).map((r) => r.body?.status)).toEqual(['progress']);
  });

  describe('final reports (retries, 413)', () => {
    it('retries a terminal update after a 5xx and a network error, 200 ms then 400 ms apart, and sends the same body each time', async () => {
      const fn = createFunction({ id: 'orders' }, async () => ({ ok: true }));
      const answers: FakeReply[] = [{ status: 503, body: { code: 'unavailable', message: 'restarting' } }, { status: 0, destroy: true }, { status: 200, body: {} }];
      engine = await startEngine({ polls: [{ status: 200, body: { jobs: [job({ execution_seq: 4, lease_token: 'tok' })] } }], update: () => answers.shift()! });
      const w = await start([fn]);
      await waitFor(() => terminals(engine).length === 3 && activeJobs(w) === 0, 'three attempts and the job to end');
      const [first, second, third] = terminals(engine);
      const expected = { status: 'completed', output: { ok: true }, steps: [], step_offset: 0, execution_seq: 4, lease_token: 'tok' };
      expect([first.body, second.body, third.body]).toEqual([expected, expected, expected]);
      expect(second.at - first.at).toBeGreaterThanOrEqual(195);
      expect(third.at - second.at).toBeGreaterThanOrEqual(395);
      expect(third.at - second.at).toBeLessThan(2_000);
    });

    it.each([
      [409, { code: 'STALE_EXECUTION', message: 'superseded' }],
      [409, { code: 'RUN_NOT_RUNNING', message: 'run is cancelled' }],
      [400, { code: 'VALIDATION_ERROR', message: 'invalid status' }],
    ])('never retries a terminal update answered %i (%j)', async (status, body) => {
      const fn = createFunction({ id: 'orders' }, async () => 'x');
      engine = await startEngine({ polls: [{ status: 200, body: { jobs: [job({ execution_seq: 1, lease_token: 't' })] } }], update: () => ({ status, body }) });
      const w = await start([fn]);
      await waitFor(() => terminal(engine), 'the terminal update');
      // The job leaves the active set only when its task is over: no retry is pending then.
      await waitFor(() => activeJobs(w) === 0, 'the job to end');
      expect(terminals(engine).map((r) => r.body.status)).toEqual(['completed']);
    });

    it('gives up after reportRetryTimeoutMs of 5xx answers, the last wait cut to the time left', async () => {
      const fn = createFunction({ id: 'orders' }, async () => 'x');
      engine = await startEngine({ polls: [{ status: 200, body: job() }], update: () => ({ status: 502, body: {} }) });
      const w = await start([fn], { reportRetryTimeoutMs: 500 });
      await waitFor(() => terminal(engine) && activeJobs(w) === 0, 'the job to give up', 5_000);
      const attempts = terminals(engine);
      // Attempts at about 0, 200 and 500 ms from the deadline's start (a timer may fire a
      // millisecond early: one more then). The second wait is cut from 400 ms to what is left.
      expect(attempts.length).toBeGreaterThanOrEqual(3);
      expect(attempts.length).toBeLessThanOrEqual(4);
      expect(attempts[1].at - attempts[0].at).toBeGreaterThanOrEqual(195);
      // No upper bound on one gap: a loaded machine fires timers late. The budget bounds the whole.
      expect(attempts[attempts.length - 1].at - attempts[0].at).toBeLessThan(1_500);
    });

    it('stops retrying at once when the worker is stopped', async () => {
      const fn = createFunction({ id: 'orders' }, async () => 'x');
      engine = await startEngine({ polls: [{ status: 200, body: job() }], update: () => ({ status: 503, body: {} }) });
      const w = await start([fn]);
      await waitFor(() => terminals(engine).length === 2, 'a retried terminal update');
      const stopped = Date.now();
      await w.stop();
      await waitFor(() => activeJobs(w) === 0, 'the job to give up');
      // Without the stop the retries would go on for reportRetryTimeoutMs (60 s): the waitFor above
      // would time out. The bound only rules that out on a loaded machine.
      expect(Date.now() - stopped).toBeLessThan(5_000);
      expect(terminals(engine)).toHaveLength(2);
    });

    it('drain waits for a terminal update that is being retried', async () => {
      const fn = createFunction({ id: 'orders' }, async () => 'drained');
      const answers: FakeReply[] = [{ status: 503, body: {} }, { status: 200, body: {} }];
      engine = await startEngine({ polls: [{ status: 200, body: job() }], update: () => answers.shift()! });
      const w = await start([fn]);
      await waitFor(() => terminals(engine).length === 1, 'the first attempt');
      await w.drain();
      const [first, second] = terminals(engine);
      expect(second.at - first.at).toBeGreaterThanOrEqual(195);
      expect(terminals(engine).map((r) => r.body)).toEqual([
        { status: 'completed', output: 'drained', steps: [], step_offset: 0 },
        { status: 'completed', output: 'drained', steps: [], step_offset: 0 },
      ]);
    });

    it('retries the progress flush of the yield path before sending yielded', async () => {
      const fn = createFunction({ id: 'orders' }, async ({ step }) => {
        await step.run('a', () => 'A');
        await step.sleep('nap', '1h');
      });
      const answers: FakeReply[] = [{ status: 500, body: {} }, { status: 0, destroy: true }];
      engine = await startEngine({
        polls: [{ status: 200, body: { jobs: [job({ execution_seq: 2, lease_token: 'tok' })] } }],
        update: (req) => (req.body.status === 'progress' ? (answers.shift() ?? { status: 200, body: {} }) : { status: 200, body: {} }),
      });
      await start([fn], { checkpointIntervalMs: 60_000 });
      const yielded = await waitFor(() => terminal(engine), 'the yielded update');
      const sent = updates(engine);
      expect(sent.map((r) => r.body.status)).toEqual(['progress', 'progress', 'progress', 'yielded']);
      const progress = { status: 'progress', steps: [expect.objectContaining({ id: 'run-1:a:0', output: 'A' })], step_offset: 0, execution_seq: 2, lease_token: 'tok' };
      for (const r of sent.slice(0, 3)) expect(r.body).toEqual(progress);
      expect(sent[1].at - sent[0].at).toBeGreaterThanOrEqual(195);
      expect(yielded.body).toEqual({ status: 'yielded', yield: expect.objectContaining({ type: 'sleep', step_id: 'run-1:nap:0' }), execution_seq: 2, lease_token: 'tok', sent_at: expect.any(String) });
    });

    it('reports a completed update refused with 413 as a PAYLOAD_TOO_LARGE failure with the same fence and no steps', async () => {
      const big = 'x'.repeat(5_000);
      const fn = createFunction({ id: 'orders' }, async ({ step }) => {
        await step.run('small', () => 1);
        return { big };
      });
      engine = await startEngine({
        polls: [{ status: 200, body: { jobs: [job({ execution_seq: 7, lease_token: 'tok-7' })] } }],
        update: (req) => (req.body.status === 'completed' ? { status: 413, body: { code: 'PAYLOAD_TOO_LARGE', message: 'report is 5200 bytes; the limit is 4096' } } : { status: 200, body: {} }),
      });
      const w = await start([fn]);
      await waitFor(() => terminals(engine).length === 2 && activeJobs(w) === 0, 'the failed update');
      const [completed, failed] = terminals(engine);
      const stepsBytes = Buffer.byteLength(JSON.stringify(completed.body.steps));
      expect(failed.body).toEqual({
        status: 'failed',
        error: {
          message: `completed report of ${Buffer.byteLength(completed.raw)} bytes (output ${5_000 + 10} bytes, 1 step(s) ${stepsBytes} bytes, largest "small" ${stepsBytes - 2} bytes) is too large for the engine (HTTP 413); engine: report is 5200 bytes; the limit is 4096`,
          code: 'PAYLOAD_TOO_LARGE',
          retryable: false,
        },
        execution_seq: 7,
        lease_token: 'tok-7',
      });
    });

    it('reports a yielded update refused with 413 as a PAYLOAD_TOO_LARGE failure', async () => {
      const fn = createFunction({ id: 'orders' }, async ({ step }) => {
        await step.waitForEvent('approval', { event: 'x'.repeat(3_000), timeout: '1h' });
      });
      engine = await startEngine({
        polls: [{ status: 200, body: { jobs: [job({ execution_seq: 3, lease_token: 't3' })] } }],
        update: (req) => (req.body.status === 'yielded' ? { status: 413, body: { code: 'PAYLOAD_TOO_LARGE', message: 'request body is over the 2048 byte limit' } } : { status: 200, body: {} }),
      });
      const w = await start([fn]);
      await waitFor(() => terminals(engine).length === 2 && activeJobs(w) === 0, 'the failed update');
      const [yielded, failed] = terminals(engine);
      expect(yielded.body.status).toBe('yielded');
      // The message measures the report as built; the send time is added per attempt.
      const { sent_at: _sentAt, ...built } = yielded.body;
      expect(failed.body).toEqual({
        status: 'failed',
        error: {
          message: `yielded report of ${Buffer.byteLength(JSON.stringify(built))} bytes (yield ${Buffer.byteLength(JSON.stringify(yielded.body.yield))} bytes) is too large for the engine (HTTP 413); engine: request body is over the 2048 byte limit`,
          code: 'PAYLOAD_TOO_LARGE',
          retryable: false,
        },
        execution_seq: 3,
        lease_token: 't3',
      });
    });

    it("replaces a failed update refused with 413 by a PAYLOAD_TOO_LARGE failure that keeps the run's error message", async () => {
      const fn = createFunction({ id: 'orders' }, async ({ step }) => {
        await step.run('blob', () => 'b'.repeat(3_000));
        throw new Error('card declined');
      });
      engine = await startEngine({
        polls: [{ status: 200, body: { jobs: [job({ execution_seq: 8, lease_token: 't8' })] } }],
        update: (req) => (req.body.steps ? { status: 413, body: { code: 'PAYLOAD_TOO_LARGE', message: 'too big' } } : { status: 200, body: {} }),
      });
      const w = await start([fn]);
      await waitFor(() => terminals(engine).length === 2 && activeJobs(w) === 0, 'the replacement failure');
      const [original, replaced] = terminals(engine);
      expect(original.body).toMatchObject({ status: 'failed', error: { message: 'card declined', retryable: true }, steps: [expect.objectContaining({ name: 'blob' })] });
      const stepBytes = Buffer.byteLength(JSON.stringify(original.body.steps[0]));
      expect(replaced.body).toEqual({
        status: 'failed',
        error: {
          message: `failed report of ${Buffer.byteLength(original.raw)} bytes (error ${Buffer.byteLength(JSON.stringify(original.body.error))} bytes, 1 step(s) ${stepBytes + 2} bytes, largest "blob" ${stepBytes} bytes) is too large for the engine (HTTP 413); engine: too big; the run's error: card declined`,
          code: 'PAYLOAD_TOO_LARGE',
          retryable: false,
        },
        execution_seq: 8,
        lease_token: 't8',
      });
    });

    it('fails the job when the progress flush before a yield is refused with 413, instead of yielding without its steps', async () => {
      const fn = createFunction({ id: 'orders' }, async ({ step }) => {
        await step.run('huge', () => 'y'.repeat(4_000));
        await step.sleep('nap', '1h');
      });
      engine = await startEngine({
        polls: [{ status: 200, body: { jobs: [job({ execution_seq: 5, lease_token: 't5' })] } }],
        update: (req) => (req.body.status === 'progress' ? { status: 413, body: { code: 'PAYLOAD_TOO_LARGE', message: 'too big' } } : { status: 200, body: {} }),
      });
      const w = await start([fn], { checkpointIntervalMs: 60_000 });
      await waitFor(() => terminal(engine) && activeJobs(w) === 0, 'the terminal update');
      const sent = updates(engine);
      expect(sent.map((r) => r.body.status)).toEqual(['progress', 'failed']);
      const stepBytes = Buffer.byteLength(JSON.stringify(sent[0].body.steps[0]));
      expect(sent[1].body).toEqual({
        status: 'failed',
        error: {
          message: `progress report of ${Buffer.byteLength(sent[0].raw)} bytes (1 step(s) ${stepBytes + 2} bytes, largest "huge" ${stepBytes} bytes) is too large for the engine (HTTP 413); engine: too big`,
          code: 'PAYLOAD_TOO_LARGE',
          retryable: false,
        },
        execution_seq: 5,
        lease_token: 't5',
      });
    });
  });

  describe('heartbeat interval', () => {
    it("uses the register answer's heartbeat_interval_ms when heartbeatIntervalMs is not set", async () => {
      const gate = deferred();
      const fn = createFunction({ id: 'orders' }, async () => gate.promise);
      engine = await startEngine({ polls: [{ status: 200, body: job() }], register: (req) => ({ status: 200, body: { worker_id: req.body.worker_id, heartbeat_interval_ms: 20 } }) });
      const w = await start([fn], { heartbeatIntervalMs: undefined });
      expect((w as unknown as { heartbeatMs: number }).heartbeatMs).toBe(20);
      // With the 30 s default none would arrive within the wait.
      await waitFor(() => engine.requests.filter((r) => r.path.endsWith('/heartbeat')).length >= 3, 'three heartbeats', 2_000);
      gate.resolve();
    });

    it('keeps heartbeatIntervalMs when set, and 30000 when the answer has no interval', async () => {
      const fn = createFunction({ id: 'orders' }, async () => 'x');
      engine = await startEngine({ register: () => ({ status: 200, body: { heartbeat_interval_ms: 20 } }) });
      const fixed = await start([fn], { heartbeatIntervalMs: 45_000 });
      expect((fixed as unknown as { heartbeatMs: number }).heartbeatMs).toBe(45_000);
      await fixed.stop();
      await engine.close();

      engine = await startEngine({ register: () => ({ status: 200, body: { worker_id: 'w' } }) });
      const defaulted = await start([fn], { heartbeatIntervalMs: undefined });
      expect((defaulted as unknown as { heartbeatMs: number }).heartbeatMs).toBe(30_000);
    });
  });
});
