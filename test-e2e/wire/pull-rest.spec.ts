/**
 * Golden wire tests: pull over REST (WIRE-PROTOCOL.md section 3, routes R2–R6), driven by raw
 * `fetch` exactly as a v0.29 `createWorker` sends them. Run state is read back with raw Connect
 * JSON (`GetRun`, `GetRunSteps`). Nothing here comes from `libs/sdk`.
 */
import {
  connect,
  findNulls,
  isIsoTime,
  isoIn,
  rest,
  startWireEngine,
  uid,
  waitFor,
  waitForRun,
  WIRE_STORES,
  WireEngine,
} from '../support/wire-harness';

const ASSIGNMENT_REQUIRED = ['job_id', 'run_id', 'function_id', 'attempt', 'event', 'completed_steps'];
const ASSIGNMENT_OPTIONAL = ['step_sequence_base', 'actor_id', 'context', 'execution_seq', 'lease_token'];

/** A v0.29-style worker id: `worker-<base36 ms>-<6 base36 chars>` (section 6). */
function workerId(): string {
  return `worker-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8).padEnd(6, '0')}`;
}

describe.each(WIRE_STORES)('wire: pull over REST (%s)', (store) => {
  let engine: WireEngine;

  beforeAll(async () => {
    engine = await startWireEngine(store);
  });

  afterAll(async () => {
    await engine?.close();
  });

  /** R1 + R2 for a fresh function: the function as the REST worker registers it, then the worker. */
  async function newWorker(): Promise<{ fnId: string; event: string; worker: string }> {
    const fnId = uid('pull-fn');
    const event = uid('pull.event');
    const worker = workerId();
    const r1 = await connect(engine.url, 'RegisterFunction', {
      id: fnId,
      name: fnId,
      triggers: [{ event }],
      preferredMode: 'EXECUTION_MODE_PULL',
      metadata: { __ironflow_code_hash: '0123456789abcdef' },
    });
    expect(r1.status).toBe(200);
    const r2 = await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, {
      worker_id: worker,
      hostname: 'wire-test-host',
      function_ids: [fnId],
      max_concurrent_jobs: 10,
      labels: {},
      version: { sdk: '0.29.0', runtime: `node-${process.version}` },
    });
    expect(r2.status).toBeGreaterThanOrEqual(200);
    expect(r2.status).toBeLessThan(300);
    return { fnId, event, worker };
  }

  async function trigger(event: string, data: unknown = {}): Promise<{ eventId: string; runId: string }> {
    const res = await connect(engine.url, 'Trigger', { event, data });
    expect(res.status).toBe(200);
    expect(res.json.runIds).toHaveLength(1);
    return { eventId: res.json.eventId, runId: res.json.runIds[0] };
  }

  /** R4 until a job arrives; answers the one assignment. */
  async function pollJob(worker: string): Promise<any> {
    return waitFor('a job assignment', async () => {
      const res = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=10`);
      if (res.status === 204) return undefined;
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type') ?? '').toMatch(/^application\/json/);
      expect(Array.isArray(res.json.jobs)).toBe(true);
      expect(res.json.jobs).toHaveLength(1);
      return res.json.jobs[0];
    });
  }

  async function ack(worker: string, job: any) {
    return rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/ack`, {
      run_id: job.run_id,
      execution_seq: job.execution_seq,
      lease_token: job.lease_token,
    });
  }

  function update(worker: string, job: any, body: Record<string, unknown>) {
    return rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}`, body);
  }

  const fence = (job: any) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });

  function stepResult(runId: string, name: string, output: unknown) {
    const started = isoIn(-3);
    return { id: `${runId}:${name}:0`, name, type: 'invoke', status: 'completed', started_at: started, ended_at: isoIn(0), duration_ms: 3, output };
  }

  async function getRun(runId: string) {
    const res = await connect(engine.url, 'GetRun', { id: runId });
    expect(res.status).toBe(200);
    return res.json;
  }

  const is2xx = (status: number) => status >= 200 && status < 300;

  it('R2 register and R3 heartbeat answer 2xx', async () => {
    const { worker } = await newWorker();
    const hb = await rest(engine.url, 'POST', `/api/v1/workers/${worker}/heartbeat`, { worker_id: worker, active_jobs: 0, jobs: [] });
    expect(is2xx(hb.status)).toBe(true);
  });

  it('R4 answers 204 with no body when there is no job', async () => {
    const { worker } = await newWorker();
    const res = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=10`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
  });

  it('R4 by a worker the engine does not know answers 404 (the worker re-registers)', async () => {
    const res = await rest(engine.url, 'GET', `/api/v1/workers/${workerId()}/jobs?available=10`);
    expect(res.status).toBe(404);
    expect(res.json.code).toBe('WORKER_NOT_FOUND');
  });

  it('R4 answers 200 {jobs:[…]} with a strict, fenced JobAssignment', async () => {
    const { fnId, event, worker } = await newWorker();
    const data = { orderId: 'o-7', lines: [1, 2, 3] };
    const { eventId, runId } = await trigger(event, data);
    const job = await pollJob(worker);
    const raw = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=10`);
    expect(raw.status).toBe(204); // the one job is out already

    const keys = Object.keys(job);
    for (const k of ASSIGNMENT_REQUIRED) expect(keys).toContain(k);
    for (const k of keys) expect([...ASSIGNMENT_REQUIRED, ...ASSIGNMENT_OPTIONAL]).toContain(k);
    // Optional fields are absent rather than null; only event.metadata may be null (3.4).
    expect(findNulls(job).filter((p) => p !== '$.event.metadata' && !/^\$\.(event\.data|completed_steps\[\d+\]\.output)/.test(p))).toEqual([]);

    expect(typeof job.job_id).toBe('string');
    expect(job.job_id.length).toBeGreaterThan(0);
    expect(job.run_id).toBe(runId);
    expect(job.function_id).toBe(fnId);
    expect(job.attempt).toBe(1);
    expect(job.completed_steps).toEqual([]);
    expect(job.step_sequence_base).toBe(0);
    expect(Number.isInteger(job.execution_seq)).toBe(true);
    expect(job.execution_seq).toBeGreaterThanOrEqual(1);
    expect(typeof job.lease_token).toBe('string');
    expect(job.lease_token.length).toBeGreaterThan(0);

    expect(job.event.id).toBe(eventId);
    expect(job.event.name).toBe(event);
    expect(job.event.data).toEqual(data);
    expect(isIsoTime(job.event.timestamp)).toBe(true);
    if ('version' in job.event) expect(job.event.version).toBeGreaterThanOrEqual(1);

    // The run is running once claimed.
    expect((await getRun(runId)).status).toBe('running');
  });

  it('R5 ack with the fence answers 2xx; R6 progress with step_offset saves the steps and leaves the run running', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);

    const progress = await update(worker, job, {
      status: 'progress',
      steps: [stepResult(runId, 'a', { x: 1 }), stepResult(runId, 'b', 'two')],
      step_offset: job.step_sequence_base,
      ...fence(job),
    });
    expect(is2xx(progress.status)).toBe(true);

    expect((await getRun(runId)).status).toBe('running');
    const steps = await connect(engine.url, 'GetRunSteps', { id: runId });
    expect(steps.status).toBe(200);
    const byId = new Map<string, any>(steps.json.steps.map((s: any) => [s.id, s]));
    expect(byId.get(`${runId}:a:0`)).toMatchObject({ name: 'a', sequence: 0, output: { x: 1 } });
    expect(byId.get(`${runId}:b:0`)).toMatchObject({ name: 'b', sequence: 1, output: 'two' });
  });

  it('R6 completed with a wrong lease_token answers 409 STALE_EXECUTION and changes nothing', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const before = await getRun(runId);

    const stale = await update(worker, job, {
      status: 'completed',
      output: { stolen: true },
      steps: [],
      step_offset: 0,
      execution_seq: job.execution_seq,
      lease_token: `${job.lease_token}-not-mine`,
    });
    expect(stale.status).toBe(409);
    expect(stale.json.code).toBe('STALE_EXECUTION');

    const after = await getRun(runId);
    expect(after.status).toBe('running');
    expect(after.output).toBeUndefined();
    expect(after.updatedAt).toBe(before.updatedAt);
  });

  it('R2 refuses a key it does not name and a worker_id that is not the path\'s; R5 and R6 naming another run_id answer 409 STALE_EXECUTION and change nothing', async () => {
    const other = workerId();
    const unknown = await rest(engine.url, 'POST', `/api/v1/workers/${other}/register`, { worker_id: other, function_ids: [], labels: {}, max_jobs: 5 });
    expect([unknown.status, unknown.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(unknown.json.message).toContain('max_jobs');
    const mismatch = await rest(engine.url, 'POST', `/api/v1/workers/${other}/register`, { worker_id: `${other}-x`, function_ids: [] });
    expect([mismatch.status, mismatch.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(mismatch.json.message).toContain(`${other}-x`);

    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    const wrongAck = await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/ack`, { run_id: 'another-run', execution_seq: job.execution_seq, lease_token: job.lease_token });
    expect([wrongAck.status, wrongAck.json?.code]).toEqual([409, 'STALE_EXECUTION']);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const before = await getRun(runId);
    const wrongReport = await update(worker, job, { status: 'completed', output: { wrong: true }, steps: [], step_offset: 0, run_id: 'another-run', ...fence(job) });
    expect([wrongReport.status, wrongReport.json?.code]).toEqual([409, 'STALE_EXECUTION']);
    expect(wrongReport.json.message).toContain('"another-run"');
    const after = await getRun(runId);
    expect([after.status, after.output, after.updatedAt]).toEqual(['running', undefined, before.updatedAt]);
  });

  it('R2 refuses function_ids that are not registered functions, naming them, and registers nothing', async () => {
    const { fnId } = await newWorker();
    const other = workerId();
    const res = await rest(engine.url, 'POST', `/api/v1/workers/${other}/register`, { worker_id: other, function_ids: [fnId, 'never-registered-fn'] });
    expect([res.status, res.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(res.json.message).toContain('never-registered-fn');
    expect(res.json.message).not.toContain(fnId);
    const poll = await rest(engine.url, 'GET', `/api/v1/workers/${other}/jobs?available=1`);
    expect([poll.status, poll.json?.code]).toEqual([404, 'WORKER_NOT_FOUND']);
  });

  it('R3, R5 and release refuse keys they do not name (400 VALIDATION_ERROR naming them) and change nothing', async () => {
    const { event, worker } = await newWorker();
    await trigger(event);
    const job = await pollJob(worker);
    const hb = await rest(engine.url, 'POST', `/api/v1/workers/${worker}/heartbeat`, { worker_id: worker, active_jobs: 1, jobs: [{ job_id: job.job_id, started_at: isoIn(0) }], lease_ms: 5 });
    expect([hb.status, hb.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(hb.json.message).toContain('lease_ms');
    const badAck = await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/ack`, { run_id: job.run_id, ...fence(job), leaseToken: job.lease_token });
    expect([badAck.status, badAck.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(badAck.json.message).toContain('leaseToken');
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const badRelease = await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/release`, { ...fence(job), reason: 'stopping' });
    expect([badRelease.status, badRelease.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(badRelease.json.message).toContain('reason');
    expect((await getRun(job.run_id)).status).toBe('running');
  });

  it('R6 refuses a key it does not name: a progress changes nothing, a fenced terminal report ends its attempt (REPORT_REJECTED)', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const progress = await update(worker, job, { status: 'progress', steps: [stepResult(runId, 'a', 1)], step_offset: 0, checkpoint: true, ...fence(job) });
    expect([progress.status, progress.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(progress.json.message).toContain('checkpoint');
    expect((await connect(engine.url, 'GetRunSteps', { id: runId })).json.steps).toEqual([]);
    expect((await getRun(runId)).status).toBe('running');
    const done = await update(worker, job, { status: 'completed', outptu: { typo: true }, steps: [], step_offset: 0, ...fence(job) });
    expect([done.status, done.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(done.json.message).toContain('outptu');
    const run = await getRun(runId);
    expect(run.status).not.toBe('running');
    expect(run.error).toMatchObject({ code: 'REPORT_REJECTED', retryable: true });
    // The execution the engine ended is fenced off: a later report of it, whatever its kind, is refused alike.
    const completed = await update(worker, job, { status: 'completed', output: { ok: true }, steps: [], step_offset: 0, ...fence(job) });
    const failed = await update(worker, job, { status: 'failed', error: { message: 'boom', code: 'E', retryable: false }, ...fence(job) });
    expect([[completed.status, completed.json?.code], [failed.status, failed.json?.code]]).toEqual([[409, 'STALE_EXECUTION'], [409, 'STALE_EXECUTION']]);
    expect(await getRun(runId)).toEqual(run);
  });

  it('R6 completed with the fence completes the run; the same report again answers 2xx with no effect', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const report = {
      status: 'completed',
      output: { shipped: true, parcels: 2 },
      steps: [stepResult(runId, 'pack', { parcels: 2 })],
      step_offset: job.step_sequence_base,
      ...fence(job),
    };

    const done = await update(worker, job, report);
    expect(is2xx(done.status)).toBe(true);
    const run = await getRun(runId);
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ shipped: true, parcels: 2 });
    expect(findNulls(run)).toEqual([]);

    const again = await update(worker, job, report);
    expect(is2xx(again.status)).toBe(true);
    const still = await getRun(runId);
    expect(still.status).toBe('completed');
    expect(still.output).toEqual({ shipped: true, parcels: 2 });
    expect(still.updatedAt).toBe(run.updatedAt);
    const steps = await connect(engine.url, 'GetRunSteps', { id: runId });
    expect(steps.json.steps.filter((s: any) => s.id === `${runId}:pack:0`)).toHaveLength(1);
  });

  it('R6 for a run cancelled meanwhile answers 409 RUN_NOT_RUNNING and the run stays cancelled', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const cancelled = await connect(engine.url, 'CancelRun', { id: runId, reason: 'operator stop' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.json.status).toBe('cancelled');

    const late = await update(worker, job, { status: 'completed', output: { late: true }, steps: [], step_offset: 0, ...fence(job) });
    expect(late.status).toBe(409);
    expect(late.json.code).toBe('RUN_NOT_RUNNING');
    const run = await getRun(runId);
    expect(run.status).toBe('cancelled');
    expect(run.output).toBeUndefined();
  });

  it('R6 with a body that is not JSON answers 400 with a code', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    const bad = await update(worker, job, '{"status": "completed", "output": ' as unknown as Record<string, unknown>);
    expect(bad.status).toBe(400);
    expect(typeof bad.json.code).toBe('string');
    expect(bad.json.code).toBe('INVALID_JSON');
    expect((await getRun(runId)).status).toBe('running');
  });

  it('R6 yielded (sleep) after a progress checkpoint: the next job carries completed_steps, step_sequence_base and a new fence', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event, { k: 1 });
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    // Yield path (3.5 step 5): flush steps as progress, then `yielded` with no steps.
    expect(is2xx((await update(worker, job, { status: 'progress', steps: [stepResult(runId, 'a', { x: 1 })], step_offset: 0, ...fence(job) })).status)).toBe(true);
    const yielded = await update(worker, job, { status: 'yielded', yield: { type: 'sleep', step_id: `${runId}:nap:0`, until: isoIn(100) }, ...fence(job) });
    expect(is2xx(yielded.status)).toBe(true);
    expect((await getRun(runId)).status).toMatch(/^(waiting|waiting_for_capacity)$/);

    const next = await pollJob(worker);
    expect(next.run_id).toBe(runId);
    expect(next.attempt).toBe(1);
    expect(next.execution_seq).toBeGreaterThan(job.execution_seq);
    expect(next.lease_token).not.toBe(job.lease_token);
    expect(next.job_id).not.toBe(job.job_id);
    expect(findNulls(next).filter((p) => p !== '$.event.metadata' && !/^\$\.(event\.data|completed_steps\[\d+\]\.output)/.test(p))).toEqual([]);
    // Rows are {step_id, name, output?}; every entry counts as completed (1.6).
    expect(next.completed_steps).toHaveLength(2);
    for (const s of next.completed_steps) for (const k of Object.keys(s)) expect(['step_id', 'name', 'output']).toContain(k);
    expect(next.completed_steps).toEqual(expect.arrayContaining([{ step_id: `${runId}:a:0`, name: 'a', output: { x: 1 } }]));
    const nap = next.completed_steps.find((s: any) => s.step_id === `${runId}:nap:0`);
    expect(nap?.name).toBe('nap');
    // 3.7: max sequence over all persisted rows + 1 (a = 0, nap = 1).
    expect(next.step_sequence_base).toBe(2);

    // The old execution's fence is dead now.
    const stale = await update(worker, job, { status: 'completed', output: 1, steps: [], step_offset: 2, ...fence(job) });
    expect(stale.status).toBe(409);
    expect(stale.json.code).toBe('STALE_EXECUTION');

    expect(is2xx((await ack(worker, next)).status)).toBe(true);
    expect(is2xx((await update(worker, next, { status: 'completed', output: 'slept', steps: [], step_offset: 2, ...fence(next) })).status)).toBe(true);
    const run = await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    expect(run.output).toBe('slept');
  });

  it('R6 failed with retryable:false fails the run with the error kept', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const failed = await update(worker, job, { status: 'failed', error: { message: 'bad address', code: 'NON_RETRYABLE', retryable: false }, ...fence(job) });
    expect(is2xx(failed.status)).toBe(true);
    const run = await getRun(runId);
    expect(run.status).toBe('failed');
    expect(run.error.message).toBe('bad address');
    expect(run.error.code).toBe('NON_RETRYABLE');
    expect(findNulls(run)).toEqual([]);
  });

  it('R4 honours `available`: three queued runs, available=2 hands out two jobs', async () => {
    const { event, worker } = await newWorker();
    for (let i = 0; i < 3; i++) await trigger(event, { i });
    const res = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=2`);
    expect(res.status).toBe(200);
    expect(res.json.jobs).toHaveLength(2);
    expect(new Set(res.json.jobs.map((j: any) => j.run_id)).size).toBe(2);
    const rest1 = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=2`);
    expect(rest1.status).toBe(200);
    expect(rest1.json.jobs).toHaveLength(1);
  });

  it('R4 refuses an `available` that is not a whole number >= 1 (400 VALIDATION_ERROR) and hands out nothing', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    for (const available of ['abc', '0', '-1', '1.5', '1&available=2']) {
      const res = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=${available}`);
      expect([available, res.status, res.json?.code]).toEqual([available, 400, 'VALIDATION_ERROR']);
    }
    expect((await getRun(runId)).status).toBe('waiting_for_capacity');
    const job = await pollJob(worker);
    expect(job.run_id).toBe(runId);
  });

  it('R2–R6 and release refuse a query parameter they do not read, by name, and change nothing (R4 reads only `available`)', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const refused = (res: { status: number; json?: any }, named: string, takes = 'none') =>
      expect([res.status, res.json]).toEqual([400, { code: 'VALIDATION_ERROR', message: `unknown query parameter(s): ${named} (this route takes ${takes})` }]);
    refused(await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=1&wait=30000`), 'wait', 'available');
    expect((await getRun(runId)).status).toBe('waiting_for_capacity');
    const job = await pollJob(worker);
    refused(await rest(engine.url, 'POST', `/api/v1/workers/${worker}/heartbeat?lease_ms=5`, { worker_id: worker, active_jobs: 1, jobs: [{ job_id: job.job_id, started_at: isoIn(0) }] }), 'lease_ms');
    refused(await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/ack?force=1`, { run_id: job.run_id, ...fence(job) }), 'force');
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    refused(await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}?status=completed`, { status: 'completed', output: 1, steps: [], step_offset: 0, ...fence(job) }), 'status');
    refused(await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/release?reason=stopping`, { run_id: job.run_id, ...fence(job) }), 'reason');
    expect((await getRun(runId)).status).toBe('running');
    refused(await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register?labels=gpu`, { worker_id: worker, hostname: 'h', function_ids: [], max_concurrent_jobs: 1, labels: {}, version: { sdk: '0.29.0', runtime: 'node' } }), 'labels');
    refused(await rest(engine.url, 'GET', '/api/v1/workers?functionId=x'), 'functionId');
  });

  it('R5 ack with a fence that is not the live one answers 409', async () => {
    const { event, worker } = await newWorker();
    await trigger(event);
    const job = await pollJob(worker);
    const res = await ack(worker, { ...job, lease_token: 'not-the-token' });
    expect(res.status).toBe(409);
    expect(res.json.code).toBe('STALE_EXECUTION');
  });

  it('R6 with a status that is not progress/completed/failed/yielded answers 400 with a code', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    const bad = await update(worker, job, { status: 'finished', ...fence(job) });
    expect(bad.status).toBe(400);
    expect(typeof bad.json.code).toBe('string');
    expect((await getRun(runId)).status).toBe('running');
  });

  it('R6 failed with retryable:true re-queues the run: the next job has attempt 2 and the flushed steps', async () => {
    const fnId = uid('pull-retry');
    const event = uid('pull.retry');
    const worker = workerId();
    expect((await connect(engine.url, 'RegisterFunction', {
      id: fnId, triggers: [{ event }], preferredMode: 'EXECUTION_MODE_PULL',
      retry: { maxAttempts: 2, initialDelayMs: 50, backoffFactor: 1, maxDelayMs: 1000 },
    })).status).toBe(200);
    expect(is2xx((await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, { worker_id: worker, function_ids: [fnId], max_concurrent_jobs: 10, labels: {} })).status)).toBe(true);
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(job.attempt).toBe(1);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const failed = await update(worker, job, {
      status: 'failed',
      error: { message: 'fetch failed', code: 'ERROR', retryable: true },
      steps: [stepResult(runId, 'reserve', { slot: 4 })],
      step_offset: 0,
      ...fence(job),
    });
    expect(is2xx(failed.status)).toBe(true);

    const next = await pollJob(worker);
    expect(next.run_id).toBe(runId);
    expect(next.attempt).toBe(2);
    expect(next.completed_steps).toEqual([{ step_id: `${runId}:reserve:0`, name: 'reserve', output: { slot: 4 } }]);
    expect(next.step_sequence_base).toBe(1);
    expect(is2xx((await ack(worker, next)).status)).toBe(true);
    expect(is2xx((await update(worker, next, { status: 'completed', output: { ok: 1 }, steps: [], step_offset: 1, ...fence(next) })).status)).toBe(true);
    const run = await getRun(runId);
    expect(run.status).toBe('completed');
    expect(run.attempt).toBe(2);
  });

  it('yielded wait_for_event: the matching event comes back as a completed_steps row whose output is the event object', async () => {
    const { event, worker } = await newWorker();
    const awaited = uid('pull.awaited');
    const { runId } = await trigger(event, { ticket: 't-9' });
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const y = await update(worker, job, { status: 'yielded', yield: { type: 'wait_for_event', step_id: `${runId}:reply:0`, event_filter: { event: awaited, match: 'data.ticket', timeout: '1h' } }, ...fence(job) });
    expect(is2xx(y.status)).toBe(true);
    expect((await getRun(runId)).status).toBe('waiting');

    const match = await connect(engine.url, 'Trigger', { event: awaited, data: { ticket: 't-9', text: 'ok' } });
    const next = await pollJob(worker);
    expect(next.run_id).toBe(runId);
    expect(next.completed_steps).toHaveLength(1);
    const row = next.completed_steps[0];
    expect(row.step_id).toBe(`${runId}:reply:0`);
    expect(row.name).toBe('reply');
    expect(row.output).toMatchObject({ id: match.json.eventId, name: awaited, data: { ticket: 't-9', text: 'ok' } });
    expect(isIsoTime(row.output.timestamp)).toBe(true);
  });

  it('yielded invoke_function: a completed child comes back as a completed_steps row with the child output', async () => {
    const { event, worker } = await newWorker();
    const childId = uid('pull-child');
    const childWorker = workerId();
    expect((await connect(engine.url, 'RegisterFunction', { id: childId, preferredMode: 'pull', triggers: [] })).status).toBe(200);
    expect(is2xx((await rest(engine.url, 'POST', `/api/v1/workers/${childWorker}/register`, { worker_id: childWorker, function_ids: [childId], max_concurrent_jobs: 10, labels: {} })).status)).toBe(true);
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const y = await update(worker, job, { status: 'yielded', yield: { type: 'invoke_function', step_id: `${runId}:${childId}:0`, function_id: childId, input: { n: 5 }, invoke_timeout_ms: 60_000 }, ...fence(job) });
    expect(is2xx(y.status)).toBe(true);

    const childJob = await pollJob(childWorker);
    expect(childJob.function_id).toBe(childId);
    expect(childJob.event.data).toEqual({ n: 5 });
    expect(is2xx((await ack(childWorker, childJob)).status)).toBe(true);
    expect(is2xx((await update(childWorker, childJob, { status: 'completed', output: { squared: 25 }, steps: [], step_offset: 0, ...fence(childJob) })).status)).toBe(true);

    const next = await pollJob(worker);
    expect(next.run_id).toBe(runId);
    expect(next.completed_steps).toEqual([{ step_id: `${runId}:${childId}:0`, name: childId, output: { squared: 25 } }]);
  });

  it('yielded invoke_function: a failed child fails the parent with INVOKE_FAILED naming the child (pull cannot express a failed step)', async () => {
    const { event, worker } = await newWorker();
    const childId = uid('pull-child-f');
    const childWorker = workerId();
    expect((await connect(engine.url, 'RegisterFunction', { id: childId, preferredMode: 'pull', triggers: [] })).status).toBe(200);
    expect(is2xx((await rest(engine.url, 'POST', `/api/v1/workers/${childWorker}/register`, { worker_id: childWorker, function_ids: [childId], max_concurrent_jobs: 10, labels: {} })).status)).toBe(true);
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    expect(is2xx((await update(worker, job, { status: 'yielded', yield: { type: 'invoke_function', step_id: `${runId}:${childId}:0`, function_id: childId, invoke_timeout_ms: 60_000 }, ...fence(job) })).status)).toBe(true);

    const childJob = await pollJob(childWorker);
    expect(is2xx((await ack(childWorker, childJob)).status)).toBe(true);
    expect(is2xx((await update(childWorker, childJob, { status: 'failed', error: { message: 'child exploded', code: 'NON_RETRYABLE', retryable: false }, ...fence(childJob) })).status)).toBe(true);

    const parent = await waitForRun(engine.url, runId, (r) => r.status === 'failed');
    expect(parent.error.code).toBe('INVOKE_FAILED');
    expect(parent.error.message).toContain(childJob.run_id);
    expect(findNulls(parent)).toEqual([]);
  });

  // Regression (engine bug found by this suite): as over push, a step output of `null` used to
  // lose its key in `completed_steps`. Issue 7 item 1: so did a step without a value (a finished
  // sleep, a step that returned undefined); the SDK's zod 4 schema declares `output: z.unknown()`
  // (a required key) and dropped the whole assignment.
  it('every completed_steps row carries `output`: null for a null output, a step that returned undefined and a finished sleep', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const steps = [stepResult(runId, 'find', null), { ...stepResult(runId, 'log', undefined), output: undefined }];
    expect(is2xx((await update(worker, job, { status: 'progress', steps, step_offset: 0, ...fence(job) })).status)).toBe(true);
    expect(is2xx((await update(worker, job, { status: 'yielded', yield: { type: 'sleep', step_id: `${runId}:nap:0`, until: isoIn(50) }, ...fence(job) })).status)).toBe(true);
    const next = await pollJob(worker);
    expect(next.completed_steps).toStrictEqual([
      { step_id: `${runId}:find:0`, name: 'find', output: null },
      { step_id: `${runId}:log:0`, name: 'log', output: null },
      { step_id: `${runId}:nap:0`, name: 'nap', output: null },
    ]);
  });

  it('the exact JSON of a pull function step.run a → step.sleep nap → step.run b: the sleep row is {"step_id","name","output":null}', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    expect(is2xx((await update(worker, job, { status: 'progress', steps: [stepResult(runId, 'a', 'A')], step_offset: 0, ...fence(job) })).status)).toBe(true);
    expect(is2xx((await update(worker, job, { status: 'yielded', yield: { type: 'sleep', step_id: `${runId}:nap:0`, until: isoIn(50) }, ...fence(job) })).status)).toBe(true);
    const raw = await waitFor('the job after the sleep', async () => {
      const res = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=10`);
      return res.status === 200 ? res : undefined;
    });
    const rows = raw.text.slice(raw.text.indexOf('"completed_steps":'), raw.text.indexOf(']', raw.text.indexOf('"completed_steps":')) + 1);
    expect(rows).toBe(`"completed_steps":[{"step_id":"${runId}:a:0","name":"a","output":"A"},{"step_id":"${runId}:nap:0","name":"nap","output":null}]`);
    const next = raw.json.jobs[0];
    expect(is2xx((await ack(worker, next)).status)).toBe(true);
    expect(is2xx((await update(worker, next, { status: 'completed', output: 'B', steps: [stepResult(runId, 'b', 'B')], step_offset: next.step_sequence_base, ...fence(next) })).status)).toBe(true);
    expect((await getRun(runId)).status).toBe('completed');
  });

  it('`event.data` is always present and an emitted event\'s `version` and `metadata` reach the assignment (absent metadata stays absent)', async () => {
    const { event, worker } = await newWorker();
    const emitted = await connect(engine.url, 'Trigger', { event, data: { n: 1 }, version: 2, metadata: { src: 'x' } });
    expect(emitted.status).toBe(200);
    const job = await pollJob(worker);
    expect(job.event).toStrictEqual({ id: emitted.json.eventId, name: event, data: { n: 1 }, timestamp: job.event.timestamp, version: 2, metadata: { src: 'x' } });
    await trigger(event);
    const plain = await pollJob(worker);
    expect(Object.keys(plain.event).sort()).toEqual(['data', 'id', 'name', 'timestamp', 'version']);
    expect(plain.event.version).toBe(1);
  });

  it('R6 completed whose step id holds U+0000 answers 400 VALIDATION_ERROR and ends the attempt (REPORT_REJECTED), never leaving the run running', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const step = { ...stepResult(runId, 'a', 1), id: `${runId}:a\u0000:0` };
    const res = await update(worker, job, { status: 'completed', output: 1, steps: [step], step_offset: 0, ...fence(job) });
    expect([res.status, res.json.code]).toEqual([400, 'VALIDATION_ERROR']);
    const run = await getRun(runId);
    expect(run.status).not.toBe('running');
    expect(run.error).toMatchObject({ code: 'REPORT_REJECTED', retryable: true });
    // The execution the engine ended is fenced off: a later report of it, whatever its kind, is refused alike.
    const completed = await update(worker, job, { status: 'completed', output: { ok: true }, steps: [], step_offset: 0, ...fence(job) });
    const failed = await update(worker, job, { status: 'failed', error: { message: 'boom', code: 'E', retryable: false }, ...fence(job) });
    expect([[completed.status, completed.json?.code], [failed.status, failed.json?.code]]).toEqual([[409, 'STALE_EXECUTION'], [409, 'STALE_EXECUTION']]);
    expect(await getRun(runId)).toEqual(run);
  });

  it('R6 over the 4 MiB limit answers 413 and fails the run at once with PAYLOAD_TOO_LARGE (not retryable), before any lease recovery', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    const huge = { status: 'completed', output: { blob: 'x'.repeat(5 * 1024 * 1024) }, steps: [], step_offset: 0, ...fence(job) };
    const res = await update(worker, job, huge);
    expect(res.status).toBe(413);
    expect(res.json.code).toBe('PAYLOAD_TOO_LARGE');
    // Read right after the 413: the failure was committed before it was answered.
    const run = await getRun(runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', retryable: false });
    expect(run.attempt).toBe(1);
  });

  it('PUT …/jobs/{jobId}/release (ours) gives a job back: 200, the run is queued at once and the next poll hands it out again; a heartbeat then answers it lost', async () => {
    const { event, worker } = await newWorker();
    const { runId } = await trigger(event);
    const job = await pollJob(worker);
    expect(is2xx((await ack(worker, job)).status)).toBe(true);
    expect(is2xx((await update(worker, job, { status: 'progress', steps: [stepResult(runId, 'a', 'A')], step_offset: 0, ...fence(job) })).status)).toBe(true);

    const released = await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/release`, { run_id: job.run_id, ...fence(job) });
    expect(released.status).toBe(200);
    expect(released.json).toEqual({ ok: true });
    expect((await getRun(runId)).status).toMatch(/^(waiting_for_capacity|running)$/);

    const hb = await rest(engine.url, 'POST', `/api/v1/workers/${worker}/heartbeat`, { worker_id: worker, active_jobs: 1, jobs: [{ job_id: job.job_id, started_at: isoIn(-100) }] });
    expect(hb.status).toBe(200);
    expect(hb.json).toEqual({ ok: true, jobs: [{ job_id: job.job_id, state: 'lost' }] });

    const again = await pollJob(worker);
    expect(again.run_id).toBe(runId);
    expect(again.attempt).toBe(1);
    expect(again.execution_seq).toBe(job.execution_seq + 1);
    expect(again.completed_steps).toStrictEqual([{ step_id: `${runId}:a:0`, name: 'a', output: 'A' }]);
    const live = await rest(engine.url, 'POST', `/api/v1/workers/${worker}/heartbeat`, { worker_id: worker, active_jobs: 1, jobs: [{ job_id: again.job_id, started_at: isoIn(0) }] });
    expect(live.json).toEqual({ ok: true, jobs: [{ job_id: again.job_id, state: 'refreshed' }] });

    const twice = await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/release`, { run_id: job.run_id, ...fence(job) });
    expect([twice.status, twice.json.code]).toEqual([409, 'STALE_EXECUTION']);
  });

  it('X-Ironflow-Environment scopes R1–R6: a worker of env "staging" gets only that env\'s runs', async () => {
    const env = uid('staging');
    const fnId = uid('pull-env');
    const event = uid('pull.env');
    const worker = workerId();
    const h = { 'x-ironflow-environment': env };
    expect((await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'EXECUTION_MODE_PULL', triggers: [{ event }] }, h)).status).toBe(200);
    expect(is2xx((await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, { worker_id: worker, function_ids: [fnId], max_concurrent_jobs: 10, labels: {} }, env)).status)).toBe(true);

    // The default env has no such function: no run.
    const other = await connect(engine.url, 'Trigger', { event, data: {} });
    expect(other.json.runIds).toEqual([]);

    const mine = await connect(engine.url, 'Trigger', { event, data: { e: 1 } }, h);
    expect(mine.json.runIds).toHaveLength(1);
    const poll = await waitFor('the staging job', async () => {
      const r = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=1`, undefined, env);
      return r.status === 200 ? r : undefined;
    });
    expect(poll.json.jobs[0].run_id).toBe(mine.json.runIds[0]);
    // Reads are scoped too: the run is not visible from the default env.
    expect((await connect(engine.url, 'GetRun', { id: mine.json.runIds[0] })).status).toBe(404);
    expect((await connect(engine.url, 'GetRun', { id: mine.json.runIds[0] }, h)).json.status).toBe('running');
  });
});
