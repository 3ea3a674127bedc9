/**
 * Golden wire tests: the client RPCs as raw Connect unary JSON (WIRE-PROTOCOL.md section 5,
 * decisions 7.1–7.3, DESIGN.md "Wire protocols"), plus `/health`, `/ready`, `/metrics`.
 * Runs are driven by a raw push endpoint or raw REST worker calls. Nothing here comes from
 * `libs/sdk`.
 */
import { gzipSync } from 'node:zlib';
import {
  connect,
  findNulls,
  isIsoTime,
  isoIn,
  PushEndpoint,
  rest,
  startPushEndpoint,
  startWireEngine,
  uid,
  waitFor,
  waitForRun,
  WIRE_STORES,
  WireEngine,
} from '../support/wire-harness';
import { envelope, h2Request } from '../support/h2-raw';
import { IronflowService } from '@ironflow/contracts/proto';

/** Keys the browser client requires on every Run (5.5). */
const RUN_REQUIRED_KEYS = ['id', 'functionId', 'eventId', 'status', 'attempt', 'maxAttempts', 'createdAt', 'updatedAt'];
const SDK_RUN_STATUSES = ['running', 'completed', 'failed', 'cancelled', 'paused', 'waiting_for_capacity', 'waiting'];
/** The engine's step vocabulary (`StepView` in libs/contracts/src/client-api.ts, statuses.ts). */
const ENGINE_STEP_TYPES = ['run', 'sleep', 'wait_for_event', 'invoke'];
const ENGINE_STEP_STATUSES = ['completed', 'failed', 'waiting', 'timed_out'];

function expectRunJson(run: any): void {
  for (const k of RUN_REQUIRED_KEYS) expect(Object.keys(run)).toContain(k);
  expect(SDK_RUN_STATUSES).toContain(run.status);
  expect(typeof run.attempt).toBe('number');
  expect(typeof run.maxAttempts).toBe('number');
  expect(findNulls(run)).toEqual([]);
  for (const k of ['createdAt', 'updatedAt', 'startedAt', 'endedAt']) {
    if (k in run) expect(isIsoTime(run[k])).toBe(true);
  }
}

function workerId(): string {
  return `worker-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8).padEnd(6, '0')}`;
}

describe.each(WIRE_STORES)('wire: client RPCs over Connect JSON (%s)', (store) => {
  let engine: WireEngine;
  let endpoint: PushEndpoint;

  beforeAll(async () => {
    endpoint = await startPushEndpoint();
    engine = await startWireEngine(store);
  });

  afterAll(async () => {
    await engine?.close();
    await endpoint?.close();
  });

  async function registerPush(fnId: string, event: string, reply: (req: any) => unknown) {
    endpoint.script(fnId, (req) => ({ body: reply(req.body) }));
    const res = await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'push', endpointUrl: `${endpoint.base}/fn/${fnId}`, triggers: [{ event }] });
    expect(res.status).toBe(200);
  }

  async function registerPull(fnId: string, event: string) {
    const res = await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'pull', triggers: [{ event }] });
    expect(res.status).toBe(200);
  }

  async function trigger(event: string, data: unknown = {}): Promise<{ eventId: string; runIds: string[] }> {
    const res = await connect(engine.url, 'Trigger', { event, data });
    expect(res.status).toBe(200);
    return res.json;
  }

  // ----------------------------------------------------------------------------------------
  // Operational endpoints

  it('GET /health and /ready answer 200; /metrics is Prometheus text with ironflow_ metrics', async () => {
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
    expect((await fetch(`${engine.url}/ready`)).status).toBe(200);
    const metrics = await fetch(`${engine.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type') ?? '').toMatch(/^text\/plain/);
    expect(await metrics.text()).toMatch(/^ironflow_\w+/m);
  });

  it('Health RPC answers {status}', async () => {
    const res = await connect(engine.url, 'Health', {});
    expect(res.status).toBe(200);
    expect(typeof res.json.status).toBe('string');
    expect(res.json.status.length).toBeGreaterThan(0);
  });

  // ----------------------------------------------------------------------------------------
  // Trigger / TriggerSync

  it('Trigger answers eventId and runIds (one per matching function; [] when none matches)', async () => {
    const event = uid('trig');
    const fnA = uid('trig-a');
    const fnB = uid('trig-b');
    await registerPull(fnA, event);
    await registerPull(fnB, event);
    const res = await connect(engine.url, 'Trigger', { event, data: { a: 1 } });
    expect(res.status).toBe(200);
    expect(Object.keys(res.json).sort()).toEqual(['debouncedFunctionIds', 'duplicate', 'eventId', 'runIds']);
    expect(res.json.debouncedFunctionIds).toEqual([]);
    expect(res.json.duplicate).toBe(false);
    expect(typeof res.json.eventId).toBe('string');
    expect(res.json.eventId.length).toBeGreaterThan(0);
    expect(res.json.runIds).toHaveLength(2);
    const fns = await Promise.all(res.json.runIds.map(async (id: string) => (await connect(engine.url, 'GetRun', { id })).json));
    expect(fns.map((r) => r.functionId).sort()).toEqual([fnA, fnB].sort());
    expect(fns.every((r) => r.eventId === res.json.eventId)).toBe(true);

    const none = await connect(engine.url, 'Trigger', { event: uid('nobody.listens'), data: {} });
    expect(none.status).toBe(200);
    expect(none.json.runIds).toEqual([]);
    expect(typeof none.json.eventId).toBe('string');
  });

  it('Trigger with an idempotency key used before answers duplicate: true, the first event\'s id and its runs, and starts nothing', async () => {
    const event = uid('dup');
    await registerPull(uid('dup-fn'), event);
    const key = uid('key');
    const first = await connect(engine.url, 'Trigger', { event, data: { n: 1 }, idempotencyKey: key });
    const again = await connect(engine.url, 'Trigger', { event, data: { n: 2 }, idempotencyKey: key });
    expect([first.status, again.status]).toEqual([200, 200]);
    expect(first.json).toEqual({ eventId: expect.any(String), runIds: [expect.any(String)], debouncedFunctionIds: [], duplicate: false });
    expect(again.json).toEqual({ ...first.json, duplicate: true });
    // The REST route answers the same.
    const rest = await fetch(`${engine.url}/api/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: event, data: {}, idempotencyKey: key }) });
    expect([rest.status, await rest.json()]).toEqual([201, { ...first.json, duplicate: true }]);
  });

  it('TriggerSync answers results[] with runId, functionId, lowercase "completed", output and durationMs, plus eventId', async () => {
    const fnId = uid('sync-ok');
    const event = uid('sync.ok');
    await registerPush(fnId, event, (req) => ({ status: 'completed', result: { echoed: req.event.data.v, n: 7 }, steps: [] }));
    const res = await connect(engine.url, 'TriggerSync', { event, data: { v: 'hello' }, timeout_ms: 10_000 });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type') ?? '').toMatch(/^application\/json/);
    expect(findNulls(res.json)).toEqual([]);
    expect(typeof res.json.eventId).toBe('string');
    expect(res.json.results).toHaveLength(1);
    const r = res.json.results[0];
    expect(r.status).toBe('completed');
    expect(r.functionId).toBe(fnId);
    expect(typeof r.runId).toBe('string');
    expect(r.output).toEqual({ echoed: 'hello', n: 7 });
    expect(typeof r.durationMs).toBe('number');
    expect(r.durationMs).toBeGreaterThanOrEqual(0);
    expect(r.error).toBeUndefined();
    const run = (await connect(engine.url, 'GetRun', { id: r.runId })).json;
    expect(run.status).toBe('completed');
    expect(run.eventId).toBe(res.json.eventId);
  });

  it('an X-Ironflow-Environment that cannot stand in a subject is refused with 400 on Connect and REST, writing nothing', async () => {
    const connectAnswer = await connect(engine.url, 'Trigger', { event: 'x', data: {} }, { 'X-Ironflow-Environment': 'a.b' });
    expect(connectAnswer.status).toBe(400);
    expect(connectAnswer.json).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });
    const restAnswer = await fetch(`${engine.url}/api/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json', 'X-Ironflow-Environment': 'sp ace' }, body: JSON.stringify({ name: 'x', data: {} }) });
    expect(restAnswer.status).toBe(400);
    expect(await restAnswer.json()).toMatchObject({ code: 'VALIDATION_ERROR' });
  });

  it('REST POST /api/v1/events names its own key `name` when the event name is missing, not a string or blank', async () => {
    for (const body of [{ data: {} }, { name: 5 }, { name: '  ' }, { name: '' }]) {
      const res = await rest(engine.url, 'POST', '/api/v1/events', body);
      expect([body, res.status, res.json]).toEqual([body, 400, { code: 'VALIDATION_ERROR', message: 'name: the event name is required (a non-empty string)' }]);
    }
  });

  it('REST refuses a key given under both its names with two values, by name, instead of keeping one (events, resume)', async () => {
    const event = uid('both.names');
    const emitted = await rest(engine.url, 'POST', '/api/v1/events', { name: event, data: {}, idempotencyKey: 'k-1', idempotency_key: 'k-2' });
    expect([emitted.status, emitted.json]).toEqual([400, { code: 'VALIDATION_ERROR', message: 'idempotencyKey and idempotency_key: two values for one key ("k-1", "k-2"): give one' }]);
    expect((await rest(engine.url, 'GET', `/api/v1/events?name=${event}`)).json.events).toEqual([]);
    const same = await rest(engine.url, 'POST', '/api/v1/events', { name: event, data: {}, idempotencyKey: 'k-3', idempotency_key: 'k-3' });
    expect(same.status).toBe(201);
    const resumed = await rest(engine.url, 'POST', '/api/v1/runs/resume', { run_id: 'run-a', runId: 'run-b' });
    expect([resumed.status, resumed.json]).toEqual([400, { code: 'VALIDATION_ERROR', message: 'run_id and runId: two values for one key ("run-a", "run-b"): give one' }]);
  });

  it('REST POST /api/v1/events refuses data that is not an object and a non-string idempotencyKey, like Trigger', async () => {
    for (const body of [{ name: 'x', data: 'hello' }, { name: 'x', data: [1, 2] }, { name: 'x', data: null }, { name: 'x', data: {}, idempotencyKey: 123 }]) {
      const res = await rest(engine.url, 'POST', '/api/v1/events', body);
      expect({ body, status: res.status, code: res.json?.code }).toEqual({ body, status: 400, code: 'VALIDATION_ERROR' });
    }
  });

  it('REST refuses what it would not act on: an unknown key of POST /api/v1/events, an unknown query parameter or a bad limit of the lists, by name', async () => {
    const event = uid('strict.event');
    const emitted = await rest(engine.url, 'POST', '/api/v1/events', { name: event, data: {}, idempotencyKey: uid('k'), bogus: 1, tags: ['a'] });
    expect([emitted.status, emitted.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(emitted.json.message).toMatch(/^unknown field\(s\): bogus, tags \(this route takes /);
    const logged = await rest(engine.url, 'GET', `/api/v1/events?name=${event}`);
    expect(logged.json.events).toEqual([]);
    for (const [path, named] of [
      ['/api/v1/runs?limit=abc', 'limit'],
      ['/api/v1/runs?limit=-1', 'limit'],
      ['/api/v1/runs?limit=2.5', 'limit'],
      ['/api/v1/events?limit=0', 'limit'],
      ['/api/v1/runs?function=orders', 'function'],
      ['/api/v1/events?since=2026-01-01', 'since'],
    ] as const) {
      const res = await rest(engine.url, 'GET', path);
      expect([path, res.status, res.json?.code]).toEqual([path, 400, 'VALIDATION_ERROR']);
      expect(res.json.message).toContain(named);
    }
    const resume = await rest(engine.url, 'POST', '/api/v1/runs/resume', { run_id: uid('run'), force: true });
    expect([resume.status, resume.json?.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(resume.json.message).toMatch(/^unknown field\(s\): force /);
    const page = await rest(engine.url, 'GET', '/api/v1/runs?limit=2&status=completed');
    expect(page.status).toBe(200);
    expect(page.json.runs.length).toBeLessThanOrEqual(2);
  });

  it('REST refuses an empty filter or cursor parameter by name, as it refuses an empty status (?functionId= was no filter)', async () => {
    for (const [path, named] of [
      ['/api/v1/runs?functionId=', 'functionId'],
      ['/api/v1/runs?status=', 'status'],
      ['/api/v1/runs?cursor=', 'cursor'],
      ['/api/v1/events?name=', 'name'],
    ] as const) {
      const res = await rest(engine.url, 'GET', path);
      expect([path, res.status, res.json]).toEqual([path, 400, { code: 'VALIDATION_ERROR', message: `${named}: an empty value (leave the parameter out instead)` }]);
    }
  });

  it('REST refuses an empty idempotencyKey (it was taken for none) and an empty registration key; Connect JSON, where proto3 cannot tell "" from absent, takes them as absent', async () => {
    const event = uid('empty.key');
    const emitted = await rest(engine.url, 'POST', '/api/v1/events', { name: event, data: {}, idempotencyKey: '' });
    expect([emitted.status, emitted.json]).toEqual([400, { code: 'VALIDATION_ERROR', message: 'idempotencyKey: a non-empty string is required' }]);
    expect((await rest(engine.url, 'GET', `/api/v1/events?name=${event}`)).json.events).toEqual([]);
    const viaConnect = await connect(engine.url, 'Trigger', { event, data: {}, idempotencyKey: '' });
    expect(viaConnect.status).toBe(200);

    const fnId = uid('empty-key-fn');
    const refused = await rest(engine.url, 'POST', '/api/v1/functions', { id: fnId, mode: 'pull', triggers: [{ event }], concurrency: { limit: 1, key: '' } });
    expect([refused.status, refused.json]).toEqual([400, { code: 'VALIDATION_ERROR', message: 'concurrency.key: an empty path (leave it out for none)' }]);
    const registered = await connect(engine.url, 'RegisterFunction', { id: fnId, triggers: [{ event }], concurrency: { limit: 1, key: '' }, preferredMode: 'EXECUTION_MODE_PULL' });
    expect([registered.status, registered.json.function.concurrency]).toEqual([200, { limit: 1, key: '' }]);
  });

  it('on an open server an Authorization header that is not "Bearer <key>" is 401 saying so on REST, Connect JSON, Connect binary and gRPC (never ignored); no header still passes', async () => {
    const basic = { authorization: 'Basic dXNlcjpwYXNz' };
    const message = 'Authorization: "Bearer <key>" is expected, not the Basic scheme';
    expect((await rest(engine.url, 'GET', '/api/v1/functions', undefined, 'default', basic)).json).toEqual({ code: 'UNAUTHENTICATED', message });
    const viaJson = await connect(engine.url, 'ListFunctions', {}, basic);
    expect([viaJson.status, viaJson.json.code, viaJson.json.ironflowCode, viaJson.json.message]).toEqual([401, 'unauthenticated', 'UNAUTHENTICATED', message]);
    const path = `/${IronflowService.typeName}/ListFunctions`;
    const binary = await h2Request(engine.port, path, { 'content-type': 'application/proto', 'connect-protocol-version': '1', ...basic }, Buffer.alloc(0));
    expect([binary.status, JSON.parse(binary.body.toString('utf8')).code]).toEqual([401, 'unauthenticated']);
    const grpc = await h2Request(engine.port, path, { 'content-type': 'application/grpc', te: 'trailers', ...basic }, envelope(new Uint8Array(0)));
    expect(grpc.trailers['grpc-status'] ?? grpc.headers['grpc-status']).toBe('16');
    expect((await connect(engine.url, 'ListFunctions', {})).status).toBe(200);
  });

  it('REST refuses a query parameter on the routes that read none, by name, and acts on nothing', async () => {
    const event = uid('query.event');
    const emitted = await rest(engine.url, 'POST', `/api/v1/events?name=${event}`, { name: event, data: {} });
    expect([emitted.status, emitted.json]).toEqual([400, { code: 'VALIDATION_ERROR', message: 'unknown query parameter(s): name (this route takes none)' }]);
    expect((await rest(engine.url, 'GET', `/api/v1/events?name=${event}`)).json.events).toEqual([]);
    const fnId = uid('query.fn');
    const registered = await rest(engine.url, 'POST', '/api/v1/functions?dryRun=true', { id: fnId, triggers: [{ event }] });
    expect([registered.status, registered.json]).toEqual([400, { code: 'VALIDATION_ERROR', message: 'unknown query parameter(s): dryRun (this route takes none)' }]);
    expect((await rest(engine.url, 'GET', '/api/v1/functions')).json.functions.map((f: { id: string }) => f.id)).not.toContain(fnId);
    for (const [method, path, named] of [
      ['GET', '/api/v1/functions?mode=push', 'mode'],
      ['GET', `/api/v1/runs/${uid('run')}?full=1`, 'full'],
      ['GET', `/api/v1/runs/${uid('run')}/steps?limit=5`, 'limit'],
      ['POST', '/api/v1/runs/resume?from_step=s1', 'from_step'],
    ] as const) {
      const res = await rest(engine.url, method, path, method === 'POST' ? { run_id: uid('run') } : undefined);
      expect([path, res.status, res.json]).toEqual([path, 400, { code: 'VALIDATION_ERROR', message: `unknown query parameter(s): ${named} (this route takes none)` }]);
    }
  });

  it('InvokeFunctionSync (ours) runs one function with its input and answers a RunResult with lowercase status', async () => {
    const fnId = uid('fn');
    await registerPush(fnId, uid('unused.event'), (req) => ({ status: 'completed', result: { got: req.event.data, name: req.event.name }, steps: [] }));
    const res = await connect(engine.url, 'InvokeFunctionSync', { function_id: fnId, input: { x: 1 }, timeout_ms: 10000 });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ functionId: fnId, status: 'completed', output: { got: { x: 1 }, name: 'ironflow/function.invoked' } });
    expect(typeof res.json.runId).toBe('string');
    expect(typeof res.json.durationMs).toBe('number');
    expect(findNulls(res.json)).toEqual([]);
    const unknown = await connect(engine.url, 'InvokeFunctionSync', { functionId: uid('missing'), input: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ code: 'not_found', ironflowCode: 'FUNCTION_NOT_FOUND' });
  });

  it('TriggerSync of a run that fails answers results[0].status "failed" with error.message', async () => {
    const fnId = uid('sync-fail');
    const event = uid('sync.fail');
    await registerPush(fnId, event, () => ({ status: 'failed', error: { message: 'validation: sku unknown', code: 'NON_RETRYABLE', retryable: false }, steps: [] }));
    const res = await connect(engine.url, 'TriggerSync', { event, data: {}, timeout_ms: 10_000 });
    expect(res.status).toBe(200);
    expect(findNulls(res.json)).toEqual([]);
    const r = res.json.results[0];
    expect(r.status).toBe('failed');
    expect(r.functionId).toBe(fnId);
    expect(r.error.message).toBe('validation: sku unknown');
    expect(r.output).toBeUndefined();
  });

  it('TriggerSync completes through a raw pull worker loop polling meanwhile', async () => {
    const fnId = uid('sync-pull');
    const event = uid('sync.pull');
    const worker = workerId();
    await registerPull(fnId, event);
    expect((await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, { worker_id: worker, function_ids: [fnId], max_concurrent_jobs: 10, labels: {} })).status).toBe(200);
    let stop = false;
    const loop = (async () => {
      while (!stop) {
        const poll = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=10`);
        if (poll.status === 200) {
          for (const job of poll.json.jobs) {
            const f = { execution_seq: job.execution_seq, lease_token: job.lease_token };
            await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}/ack`, { run_id: job.run_id, ...f });
            await rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}`, { status: 'completed', output: { doubled: job.event.data.n * 2 }, steps: [], step_offset: job.step_sequence_base ?? 0, ...f });
          }
        } else await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      const res = await connect(engine.url, 'TriggerSync', { event, data: { n: 21 }, timeout_ms: 10_000 });
      expect(res.status).toBe(200);
      expect(res.json.results[0]).toMatchObject({ functionId: fnId, status: 'completed', output: { doubled: 42 } });
    } finally {
      stop = true;
      await loop;
    }
  });

  // ----------------------------------------------------------------------------------------
  // GetRun / ListRuns / CancelRun

  it('GetRun returns the Run JSON: lowercase status, attempt/maxAttempts present, ISO string times, no nulls', async () => {
    const fnId = uid('get');
    const event = uid('get.ev');
    await registerPull(fnId, event);
    const { eventId, runIds } = await trigger(event, { q: 1 });
    const res = await connect(engine.url, 'GetRun', { id: runIds[0] });
    expect(res.status).toBe(200);
    const run = res.json;
    expectRunJson(run);
    expect(run.id).toBe(runIds[0]);
    expect(run.functionId).toBe(fnId);
    expect(run.eventId).toBe(eventId);
    expect(run.status).toBe('waiting_for_capacity');
    expect(run.attempt).toBe(1);
    expect(run.maxAttempts).toBe(3); // section 6 default
    expect(run.output).toBeUndefined();
    expect(run.error).toBeUndefined();
  });

  it('ListRuns with status "completed" (lowercase) filters; with function_id (snake_case) filters by function', async () => {
    const event = uid('list.ev');
    const fnDone = uid('list-done');
    const fnIdle = uid('list-idle');
    await registerPush(fnDone, event, () => ({ status: 'completed', result: 1, steps: [] }));
    await registerPull(fnIdle, event);
    const { runIds } = await trigger(event);
    const runs = await Promise.all(runIds.map(async (id) => (await connect(engine.url, 'GetRun', { id })).json));
    const doneId = runs.find((r) => r.functionId === fnDone).id;
    const idleId = runs.find((r) => r.functionId === fnIdle).id;
    await waitForRun(engine.url, doneId, (r) => r.status === 'completed');

    const completed = await connect(engine.url, 'ListRuns', { status: 'completed', limit: 500 });
    expect(completed.status).toBe(200);
    expect(findNulls(completed.json)).toEqual([]);
    expect(Array.isArray(completed.json.runs)).toBe(true);
    expect(typeof completed.json.nextCursor).toBe('string');
    expect(typeof completed.json.totalCount).toBe('number');
    expect(completed.json.runs.length).toBeGreaterThan(0);
    for (const r of completed.json.runs) {
      expectRunJson(r);
      expect(r.status).toBe('completed');
    }
    const ids = completed.json.runs.map((r: any) => r.id);
    expect(ids).toContain(doneId);
    expect(ids).not.toContain(idleId);

    const byFn = await connect(engine.url, 'ListRuns', { function_id: fnIdle });
    expect(byFn.status).toBe(200);
    expect(byFn.json.runs.map((r: any) => r.id)).toEqual([idleId]);
    expect(byFn.json.totalCount).toBe(1);
  });

  it('CancelRun returns the run with status "cancelled"', async () => {
    const fnId = uid('cancel');
    const event = uid('cancel.ev');
    await registerPull(fnId, event);
    const { runIds } = await trigger(event);
    const res = await connect(engine.url, 'CancelRun', { id: runIds[0], reason: 'customer changed their mind' });
    expect(res.status).toBe(200);
    expectRunJson(res.json);
    expect(res.json.id).toBe(runIds[0]);
    expect(res.json.status).toBe('cancelled');
    expect((await connect(engine.url, 'GetRun', { id: runIds[0] })).json.status).toBe('cancelled');
  });

  // ----------------------------------------------------------------------------------------
  // Aliases and tolerance (7.1, 7.2)

  it.each([['"pull"', 'pull'], ['"EXECUTION_MODE_PULL"', 'EXECUTION_MODE_PULL'], ['2', 2]])(
    'RegisterFunction accepts preferredMode %s',
    async (_label, mode) => {
      const fnId = uid('mode');
      const event = uid('mode.ev');
      // Registered as push first, so the alias must really be read to flip the mode.
      const push = await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'push', endpointUrl: `${endpoint.base}/fn/${fnId}`, triggers: [{ event }] });
      expect(push.status).toBe(200);
      expect(push.json.function.preferredMode).toBe('EXECUTION_MODE_PUSH');
      const res = await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: mode, triggers: [{ event }] });
      expect(res.status).toBe(200);
      expect(typeof res.json.created).toBe('boolean');
      expect(res.json.function.preferredMode).toBe('EXECUTION_MODE_PULL');
      // …and the runs go to pull workers.
      const worker = workerId();
      await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, { worker_id: worker, function_ids: [fnId], max_concurrent_jobs: 10, labels: {} });
      const { runIds } = await trigger(event);
      const job = await waitFor('the pull job', async () => {
        const poll = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=1`);
        return poll.status === 200 ? poll.json.jobs[0] : undefined;
      });
      expect(job.run_id).toBe(runIds[0]);
    },
  );

  it('RegisterFunction rejects a preferredMode that is no alias with 400', async () => {
    const res = await connect(engine.url, 'RegisterFunction', { id: uid('mode-bad'), preferredMode: 'sideways', triggers: [] });
    expect(res.status).toBe(400);
    expect(res.json.code).toBe('invalid_argument');
  });

  it('Trigger reads idempotency_key (snake_case) the same as idempotencyKey', async () => {
    const fnId = uid('idem');
    const event = uid('idem.ev');
    await registerPull(fnId, event);
    const key = uid('key');
    const first = await connect(engine.url, 'Trigger', { event, data: { n: 1 }, idempotency_key: key });
    expect(first.status).toBe(200);
    expect(first.json.runIds).toHaveLength(1);
    const again = await connect(engine.url, 'Trigger', { event, data: { n: 2 }, idempotencyKey: key });
    expect(again.status).toBe(200);
    expect(again.json.eventId).toBe(first.json.eventId);
    expect(again.json.runIds).toEqual(first.json.runIds);
    const runs = await connect(engine.url, 'ListRuns', { functionId: fnId });
    expect(runs.json.runs).toHaveLength(1);
  });

  it('TriggerSync reads timeout_ms (snake_case): a run nobody executes is answered as it stands after that time', async () => {
    const fnId = uid('sync-timeout');
    const event = uid('sync.timeout');
    await registerPull(fnId, event);
    const started = Date.now();
    const res = await connect(engine.url, 'TriggerSync', { event, data: {}, timeout_ms: 300 });
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(5_000); // not the 30 s default
    expect(res.json.results).toHaveLength(1);
    expect(res.json.results[0].status).toBe('waiting_for_capacity');
    expect(findNulls(res.json)).toEqual([]);
  });

  // RegisterFunction is the exception: it refuses them by name (README "Function options"; the test "Connect RegisterFunction is strict too").
  it('unknown fields are ignored by the RPCs other than RegisterFunction', async () => {
    const fnId = uid('unknown');
    const event = uid('unknown.ev');
    const reg = await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'pull', triggers: [{ event }] });
    expect(reg.status).toBe(200);
    const trig = await connect(engine.url, 'Trigger', { event, data: { a: 1 }, futureField: 'x' });
    expect(trig.status).toBe(200);
    expect(trig.json.runIds).toHaveLength(1);
    const get = await connect(engine.url, 'GetRun', { id: trig.json.runIds[0], includeEverything: true });
    expect(get.status).toBe(200);
    expect(get.json.input).toEqual({ a: 1 });
  });

  it('RegisterFunction refuses, by name, every option the engine does not act on yet, and registers nothing', async () => {
    const fnId = uid('unsupported');
    const reg = await connect(engine.url, 'RegisterFunction', {
      id: fnId,
      preferredMode: 'pull',
      triggers: [{ event: 'a.b' }],
      actorKey: 'data.userId',
    });
    expect(reg.status).toBe(400);
    expect(reg.json).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });
    for (const name of ['actorKey']) {
      expect(reg.json.message).toContain(name);
    }
    const list = await connect(engine.url, 'ListFunctions', {});
    expect(JSON.stringify(list.json)).not.toContain(fnId);
  });

  it('RegisterFunction stores cancelOn and answers it back; ListFunctions shows it', async () => {
    const fnId = uid('cancellable');
    const reg = await connect(engine.url, 'RegisterFunction', {
      id: fnId,
      preferredMode: 'pull',
      triggers: [{ event: uid('placed') }],
      cancelOn: [{ event: 'order.cancelled', match: 'data.orderId' }, { event: 'shop.closed' }],
    });
    expect(reg.status).toBe(200);
    expect(reg.json.function.cancelOn).toEqual([{ event: 'order.cancelled', match: 'data.orderId', if: '' }, { event: 'shop.closed', match: '', if: '' }]);
    const list = await connect(engine.url, 'ListFunctions', {});
    const listed = (list.json.functions as { id: string; cancelOn: unknown }[]).find((f) => f.id === fnId);
    expect(listed?.cancelOn).toEqual([{ event: 'order.cancelled', match: 'data.orderId', if: '' }, { event: 'shop.closed', match: '', if: '' }]);
  });

  it('RegisterFunction acts on cancelOn[].if (ours, CancelOnSpec field 100): a bad condition is refused naming it, a good one is kept and gates the cancel', async () => {
    const bad = await connect(engine.url, 'RegisterFunction', { id: uid('cancel-if'), preferredMode: 'pull', cancelOn: [{ event: 'x', if: 'async.data.reason ==' }] });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });
    expect(bad.json.message).toContain('cancelOn.0.if');

    const fnId = uid('cancel-if');
    const placed = uid('placed');
    const cancelled = uid('cancelled');
    const reg = await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'pull', triggers: [{ event: placed }], cancelOn: [{ event: cancelled, match: 'data.orderId', if: 'async.data.reason != "test"' }] });
    expect(reg.status).toBe(200);
    expect(reg.json.function.cancelOn).toEqual([{ event: cancelled, match: 'data.orderId', if: 'async.data.reason != "test"' }]);
    const run = (await connect(engine.url, 'Trigger', { event: placed, data: { orderId: 'A' } })).json.runIds[0];
    await connect(engine.url, 'Trigger', { event: cancelled, data: { orderId: 'A', reason: 'test' } });
    const real = await connect(engine.url, 'Trigger', { event: cancelled, data: { orderId: 'A', reason: 'customer' } });
    const ended = await waitForRun(engine.url, run, (r) => r.status === 'cancelled');
    // The event whose condition failed did not cancel: the cause is the second one.
    expect(ended.error.message).toBe(`cancel_on: ${cancelled} ${real.json.eventId}`);
    const steps = await connect(engine.url, 'GetRunSteps', { id: run });
    expect(steps.json.history.filter((h: any) => h.eventType === 'run.cancelled')).toHaveLength(1);
  });

  it('a cancelOn event cancels the matching run only; GetRun names the event as the cause and GetRunSteps records cancel-on-event', async () => {
    const fnId = uid('cancellable');
    const placed = uid('placed');
    const cancelled = uid('cancelled');
    expect((await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'pull', triggers: [{ event: placed }], cancelOn: [{ event: cancelled, match: 'data.orderId' }] })).status).toBe(200);
    const runA = (await connect(engine.url, 'Trigger', { event: placed, data: { orderId: 'A' } })).json.runIds[0];
    const runB = (await connect(engine.url, 'Trigger', { event: placed, data: { orderId: 'B' } })).json.runIds[0];
    const cancel = await connect(engine.url, 'Trigger', { event: cancelled, data: { orderId: 'A' } });
    expect(cancel.json.runIds).toEqual([]);
    const run = await waitForRun(engine.url, runA, (r) => r.status === 'cancelled');
    expect(run.error).toMatchObject({ code: 'CANCELLED', message: `cancel_on: ${cancelled} ${cancel.json.eventId}` });
    const steps = await connect(engine.url, 'GetRunSteps', { id: runA });
    expect(steps.json.history.find((h: any) => h.eventType === 'run.cancelled')).toMatchObject({ cause: 'cancel-on-event' });
    expect((await connect(engine.url, 'GetRun', { id: runB })).json.status).toBe('waiting_for_capacity');
  });

  it('RegisterFunction takes cron and expression triggers and debounce as the SDK sends them (snake_case max_wait_ms too) and answers them back', async () => {
    const fnId = uid('options');
    const reg = await connect(engine.url, 'RegisterFunction', {
      id: fnId,
      preferredMode: 'pull',
      triggers: [{ event: 'scheduled.cleanup', cron: 'CRON_TZ=Europe/Berlin 0 3 * * *' }, { event: 'order.placed', expression: 'event.data.amount > 10' }],
      debounce: { period_ms: 2000, key: 'customerId', max_wait_ms: 5000 },
    });
    expect(reg.status).toBe(200);
    expect(reg.json.function).toMatchObject({
      triggers: [{ event: 'scheduled.cleanup', cron: 'CRON_TZ=Europe/Berlin 0 3 * * *', expression: '' }, { event: 'order.placed', expression: 'event.data.amount > 10', cron: '' }],
      debounce: { periodMs: 2000, key: 'customerId', maxWaitMs: 5000 },
    });
    const listed = (await connect(engine.url, 'ListFunctions', {})).json.functions.find((f: { id: string }) => f.id === fnId);
    expect(listed.debounce).toEqual({ periodMs: 2000, key: 'customerId', maxWaitMs: 5000 });
  });

  it('RegisterFunction refuses a cron schedule, an expression or a debounce that cannot work, naming each', async () => {
    const reg = await connect(engine.url, 'RegisterFunction', {
      id: uid('bad-options'),
      preferredMode: 'pull',
      triggers: [{ event: 'a', cron: '0 25 * * *' }, { event: 'b', expression: 'event.data.amount >' }],
    });
    expect(reg.status).toBe(400);
    expect(reg.json).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });
    expect(reg.json.message).toContain('triggers.0.cron');
    expect(reg.json.message).toContain('triggers.1.expression');
    const debounce = await connect(engine.url, 'RegisterFunction', { id: uid('bad-debounce'), preferredMode: 'pull', triggers: [{ event: 'c' }], debounce: { period_ms: 500 } });
    expect(debounce.status).toBe(400);
    expect(debounce.json.message).toContain('debounce.periodMs');
  });

  it('TriggerSync of an event that starts a debounced function answers 400 failed_precondition (FUNCTION_DEBOUNCED); Trigger accepts it', async () => {
    const fnId = uid('debounced');
    const event = uid('typed');
    expect((await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'pull', triggers: [{ event }], debounce: { period_ms: 1000 } })).status).toBe(200);
    const sync = await connect(engine.url, 'TriggerSync', { event, data: {}, timeout_ms: 1000 });
    expect(sync.status).toBe(400);
    expect(sync.json).toMatchObject({ code: 'failed_precondition', ironflowCode: 'FUNCTION_DEBOUNCED' });
    const async = await connect(engine.url, 'Trigger', { event, data: {} });
    expect(async.status).toBe(200);
    expect(async.json.runIds).toEqual([]);
    // Ours (TriggerResponse field 100): the answer says which functions were debounced.
    expect(async.json.debouncedFunctionIds).toEqual([fnId]);
    const plain = await connect(engine.url, 'Trigger', { event: uid('nobody'), data: {} });
    expect(plain.json.debouncedFunctionIds).toEqual([]);
  });

  it('Trigger takes an event version and metadata (as `client.emit(name, data, {version, metadata})` sends them), and refuses a version below 1 or metadata that is not an object', async () => {
    const ok = await connect(engine.url, 'Trigger', { event: uid('ev'), data: {}, version: 2, metadata: { src: 'x' } });
    expect(ok.status).toBe(200);
    expect(typeof ok.json.eventId).toBe('string');
    for (const extra of [{ version: -1 }, { metadata: [1, 2] }]) {
      const res = await connect(engine.url, 'Trigger', { event: uid('ev'), data: {}, ...extra });
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ code: 'invalid_argument' });
    }
  });

  // ----------------------------------------------------------------------------------------
  // Errors (5.1)

  it('GetRun of an unknown id answers 404 with a JSON error body: Connect code "not_found" and our RUN_NOT_FOUND', async () => {
    const res = await connect(engine.url, 'GetRun', { id: 'no-such-run' });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type') ?? '').toMatch(/^application\/json/);
    expect(res.json.code).toBe('not_found');
    expect(res.json.ironflowCode).toBe('RUN_NOT_FOUND');
    expect(typeof res.json.message).toBe('string');
    expect(res.json.message.length).toBeGreaterThan(0);
  });

  it('a body that is not JSON answers 400 invalid_argument / INVALID_JSON', async () => {
    const res = await connect(engine.url, 'Trigger', '{"event": "x", "data": ');
    expect(res.status).toBe(400);
    expect(res.json.code).toBe('invalid_argument');
    expect(res.json.ironflowCode).toBe('INVALID_JSON');
    expect(typeof res.json.message).toBe('string');
  });

  // Regression: the answer to an oversized Connect body was 413 `invalid_argument` (a status that is
  // not the code's); a message over the limit is `resource_exhausted` in Connect and gRPC, which the
  // Connect protocol maps to 429. Both routes answer it: the fast path leaves an oversized body to
  // Express, whose raw-body limit answers it, and a chunked body is read to the limit there too.
  it('a Trigger body over 4 MiB answers the Connect error: 429 resource_exhausted, ironflowCode PAYLOAD_TOO_LARGE', async () => {
    const event = uid('big');
    const big = 'x'.repeat(4 * 1024 * 1024 + 1024);
    const res = await connect(engine.url, 'Trigger', { event, data: { big } });
    expect([res.status, res.json.code, res.json.ironflowCode]).toEqual([429, 'resource_exhausted', 'PAYLOAD_TOO_LARGE']);
    expect(res.json.message).toBe(`request body is over the ${4 * 1024 * 1024} byte limit`);
    expect(res.json.details).toEqual([expect.objectContaining({ type: 'ironflow.v1.EngineErrorInfo', debug: { code: 'PAYLOAD_TOO_LARGE' } })]);
    const chunked = await fetch(`${engine.url}/ironflow.v1.IronflowService/Trigger`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new Blob([JSON.stringify({ event, data: { big } })]).stream(),
      duplex: 'half',
    } as RequestInit & { duplex: 'half' });
    expect([chunked.status, ((await chunked.json()) as { code: string }).code]).toEqual([429, 'resource_exhausted']);
    expect((await rest(engine.url, 'GET', `/api/v1/events?name=${event}`)).json.events).toEqual([]);
  });

  // The api-gateway answers the plain case (Content-Length, no Content-Encoding, the exact path)
  // ahead of Express and Nest (libs/services/src/http/connect-unary-fast-path.ts); every other
  // request takes the Express route. Both must answer alike.
  it('a call answers the same whether its body comes plain, gzip-compressed or chunked, or its path ends with a slash', async () => {
    const body = JSON.stringify({ id: 'no-such-run' });
    const call = async (path: string, init: RequestInit & { duplex?: 'half' }) => {
      const res = await fetch(`${engine.url}${path}`, { method: 'POST', ...init });
      return { status: res.status, contentType: res.headers.get('content-type'), json: await res.json() };
    };
    const plain = await call('/ironflow.v1.IronflowService/GetRun', { headers: { 'content-type': 'application/json' }, body });
    expect(plain).toMatchObject({ status: 404, contentType: 'application/json; charset=utf-8', json: { code: 'not_found', ironflowCode: 'RUN_NOT_FOUND' } });
    const gzip = await call('/ironflow.v1.IronflowService/GetRun', { headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipSync(body) });
    const chunked = await call('/ironflow.v1.IronflowService/GetRun', {
      headers: { 'content-type': 'application/json' },
      body: new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode(body)); c.close(); } }),
      duplex: 'half',
    });
    const slash = await call('/ironflow.v1.IronflowService/GetRun/', { headers: { 'content-type': 'application/json' }, body });
    expect(gzip).toEqual(plain);
    expect(chunked).toEqual(plain);
    expect(slash).toEqual(plain);
  });

  // ----------------------------------------------------------------------------------------
  // GetRunSteps

  // Step `type`/`status` must be the engine's lowercase strings (StepView in
  // libs/contracts/src/client-api.ts), as run statuses are, not protojson `STEP_TYPE_*` /
  // `STEP_STATUS_*` (the JSON layer rendered those until libs/rpc/src/client-methods.ts
  // `patchStepJson` patched them).
  it('GetRunSteps answers step type/status as the lowercase engine strings (run, sleep, invoke; completed, waiting)', async () => {
    const fnId = uid('steps');
    const child = uid('steps-child');
    const event = uid('steps.ev');
    const worker = workerId();
    await registerPull(fnId, event);
    await registerPull(child, uid('never'));
    expect((await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, { worker_id: worker, function_ids: [fnId], max_concurrent_jobs: 10, labels: {} })).status).toBe(200);
    const poll = () => waitFor('a job', async () => {
      const r = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=1`);
      return r.status === 200 ? r.json.jobs[0] : undefined;
    });
    const put = (job: any, path: string, body: Record<string, unknown>) =>
      rest(engine.url, 'PUT', `/api/v1/workers/${worker}/jobs/${job.job_id}${path}`, { ...body, execution_seq: job.execution_seq, lease_token: job.lease_token });

    // Run 1: step `a` completed, a short sleep (completed by the engine), then a long sleep (waiting).
    const r1 = (await trigger(event)).runIds[0];
    let job = await poll();
    await put(job, '/ack', { run_id: r1 });
    await put(job, '', { status: 'progress', steps: [{ id: `${r1}:a:0`, name: 'a', type: 'invoke', status: 'completed', started_at: isoIn(-1), ended_at: isoIn(0), duration_ms: 1, output: { x: 1 } }], step_offset: 0 });
    expect((await put(job, '', { status: 'yielded', yield: { type: 'sleep', step_id: `${r1}:nap:0`, until: isoIn(100) } })).status).toBe(200);
    job = await poll();
    expect(job.run_id).toBe(r1);
    await put(job, '/ack', { run_id: r1 });
    expect((await put(job, '', { status: 'yielded', yield: { type: 'sleep', step_id: `${r1}:long:0`, until: isoIn(3_600_000) } })).status).toBe(200);

    // Run 2: an invoke of a child function (waiting).
    const r2 = (await trigger(event)).runIds[0];
    job = await poll();
    expect(job.run_id).toBe(r2);
    await put(job, '/ack', { run_id: r2 });
    expect((await put(job, '', { status: 'yielded', yield: { type: 'invoke_function', step_id: `${r2}:${child}:0`, function_id: child, input: { q: 1 }, invoke_timeout_ms: 3_600_000 } })).status).toBe(200);

    const s1 = await connect(engine.url, 'GetRunSteps', { id: r1 });
    expect(s1.status).toBe(200);
    expect(findNulls(s1.json)).toEqual([]);
    const steps1 = new Map<string, any>(s1.json.steps.map((s: any) => [s.id, s]));
    for (const s of s1.json.steps) {
      expect(ENGINE_STEP_TYPES).toContain(s.type);
      expect(ENGINE_STEP_STATUSES).toContain(s.status);
    }
    expect(steps1.get(`${r1}:a:0`)).toMatchObject({ name: 'a', type: 'run', status: 'completed', output: { x: 1 } });
    expect(steps1.get(`${r1}:nap:0`)).toMatchObject({ name: 'nap', type: 'sleep', status: 'completed' });
    expect(steps1.get(`${r1}:long:0`)).toMatchObject({ name: 'long', type: 'sleep', status: 'waiting' });

    const s2 = await connect(engine.url, 'GetRunSteps', { id: r2 });
    expect(s2.status).toBe(200);
    const inv = s2.json.steps.find((s: any) => s.id === `${r2}:${child}:0`);
    expect(inv).toMatchObject({ name: child, type: 'invoke', status: 'waiting' });
    expect(typeof inv.childRunId).toBe('string');
    // The child shows up as a Run with a lowercase status.
    expect(s2.json.children.map((c: any) => c.status)).toEqual(['waiting_for_capacity']);
  });

  it('TriggerSync of a run cancelled while it waits answers results[0].status "cancelled"', async () => {
    const fnId = uid('sync-cancel');
    const event = uid('sync.cancel');
    await registerPull(fnId, event);
    const pending = connect(engine.url, 'TriggerSync', { event, data: {}, timeout_ms: 10_000 });
    const runId = await waitFor('the run', async () => {
      const list = await connect(engine.url, 'ListRuns', { functionId: fnId });
      return list.json.runs[0]?.id as string | undefined;
    });
    expect((await connect(engine.url, 'CancelRun', { id: runId, reason: 'stop' })).json.status).toBe('cancelled');
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.json.results[0]).toMatchObject({ runId, functionId: fnId, status: 'cancelled' });
    expect(findNulls(res.json)).toEqual([]);
  });

  it('ListRuns pages with limit and nextCursor; the last page answers nextCursor ""', async () => {
    const fnId = uid('page');
    const event = uid('page.ev');
    await registerPull(fnId, event);
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) (await trigger(event, { i })).runIds.forEach((id) => ids.add(id));
    const seen: string[] = [];
    let cursor = '';
    for (let page = 0; page < 5; page++) {
      const res = await connect(engine.url, 'ListRuns', { functionId: fnId, limit: 2, ...(cursor ? { cursor } : {}) });
      expect(res.status).toBe(200);
      expect(res.json.totalCount).toBe(3);
      seen.push(...res.json.runs.map((r: any) => r.id));
      cursor = res.json.nextCursor;
      if (cursor === '') break;
    }
    expect(cursor).toBe('');
    expect(seen.sort()).toEqual([...ids].sort());
  });

  it('Trigger without an event name answers 400 invalid_argument / VALIDATION_ERROR', async () => {
    const res = await connect(engine.url, 'Trigger', { data: { a: 1 } });
    expect(res.status).toBe(400);
    expect(res.json.code).toBe('invalid_argument');
    expect(res.json.ironflowCode).toBe('VALIDATION_ERROR');
  });

  it('U+0000 in a name, id or key answers 400 VALIDATION_ERROR on Connect and REST (never a 500, never stored), on every store', async () => {
    const nul = '\u0000';
    for (const [method, body] of [
      ['Trigger', { event: `e${nul}`, data: {} }],
      ['Trigger', { event: 'e', data: {}, idempotencyKey: `k${nul}` }],
      ['GetRun', { id: `r${nul}` }],
      ['CancelRun', { id: `r${nul}`, reason: '' }],
      ['RegisterFunction', { id: uid('nul'), name: `n${nul}`, preferredMode: 'pull' }],
    ] as const) {
      const res = await connect(engine.url, method, body);
      expect([method, res.status, res.json?.ironflowCode]).toEqual([method, 400, 'VALIDATION_ERROR']);
    }
    for (const [verb, path, body] of [
      ['POST', '/api/v1/events', { name: `e${nul}`, data: {} }],
      ['GET', '/api/v1/runs/r%00', undefined],
      ['GET', '/api/v1/events?name=e%00', undefined],
      ['GET', '/api/v1/events?cursor=1%3Ae%00', undefined],
      ['GET', '/api/v1/events?name=a&name=b', undefined],
      ['GET', '/api/v1/runs?functionId=f%00', undefined],
      ['GET', '/api/v1/runs?status=failed&status=running', undefined],
      ['POST', '/api/v1/functions', { id: uid('nul'), mode: 'pull', triggers: [{ event: `x${nul}` }] }],
      ['POST', '/api/v1/workers/w%00/register', { worker_id: 'w', function_ids: [] }],
      ['GET', '/api/v1/workers/w%00/jobs?available=1', undefined],
    ] as const) {
      const res = await rest(engine.url, verb, path, body);
      expect([path, res.status, res.json?.code]).toEqual([path, 400, 'VALIDATION_ERROR']);
    }
  });

  it('REST registration applies the same integer ranges as Connect: initialDelayMs 1e19 is a 400 on both', async () => {
    const retry = { maxAttempts: 2, initialDelayMs: 1e19 };
    const viaRest = await rest(engine.url, 'POST', '/api/v1/functions', { id: uid('range'), mode: 'pull', retry });
    expect([viaRest.status, viaRest.json.code]).toEqual([400, 'VALIDATION_ERROR']);
    const viaConnect = await connect(engine.url, 'RegisterFunction', { id: uid('range'), preferredMode: 'pull', retry });
    expect([viaConnect.status, viaConnect.json.code]).toEqual([400, 'invalid_argument']);
  });

  it('REST registration is strict: an unknown key, top-level or nested, is a 400 VALIDATION_ERROR naming it, and nothing is registered', async () => {
    const id = uid('strict');
    const res = await rest(engine.url, 'POST', '/api/v1/functions', { id, mode: 'pull', triggers: [{ event: 'x' }], timeout: 5000, retry: { maxAttempts: 2, maxAttemps: 3 } });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ code: 'VALIDATION_ERROR', message: 'unknown field(s), not options of this engine: retry.maxAttemps, timeout' });
    const listed = await rest(engine.url, 'GET', '/api/v1/functions');
    expect((listed.json.functions as { id: string }[]).map((f) => f.id)).not.toContain(id);
  });

  it('Connect RegisterFunction is strict too: an unknown key at any depth is a 400 naming it, nothing is registered; both spellings of known keys still pass', async () => {
    const id = uid('strict');
    const res = await connect(engine.url, 'RegisterFunction', {
      id, preferredMode: 'pull', retries: 3, retry: { maxAttempts: 2, maxAttemps: 3 }, triggers: [{ event: 'x', evnt: 'y' }], debounce: { period_ms: 1000, max_wait_ms: 2000, maxWait: 5 },
    });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR', message: 'unknown field(s), not options of this engine: retries, retry.maxAttemps, triggers.0.evnt, debounce.maxWait' });
    const listed = await rest(engine.url, 'GET', '/api/v1/functions');
    expect((listed.json.functions as { id: string }[]).map((f) => f.id)).not.toContain(id);
    const ok = await connect(engine.url, 'RegisterFunction', { id, preferred_mode: 'pull', timeout_ms: 5000, retry: { max_attempts: 2 }, debounce: { period_ms: 1000, max_wait_ms: 2000 }, metadata: { anything: { goes: true } } });
    expect([ok.status, ok.json.created]).toEqual([200, true]);
  });

  it('Emit (IronflowService) takes the Trigger message and answers eventId and runIds', async () => {
    const fnId = uid('emit');
    const event = uid('emit.ev');
    await registerPull(fnId, event);
    const res = await connect(engine.url, 'Emit', { event, data: { via: 'emit' }, idempotency_key: uid('k') });
    expect(res.status).toBe(200);
    expect(typeof res.json.eventId).toBe('string');
    expect(res.json.runIds).toHaveLength(1);
    expect((await connect(engine.url, 'GetRun', { id: res.json.runIds[0] })).json.input).toEqual({ via: 'emit' });
  });

  it('TriggerSync of an event no function listens to answers results: [] (the SDK raises NO_RESULTS)', async () => {
    const res = await connect(engine.url, 'TriggerSync', { event: uid('nobody'), data: {}, timeout_ms: 1_000 });
    expect(res.status).toBe(200);
    expect(res.json.results).toEqual([]);
    expect(typeof res.json.eventId).toBe('string');
  });

  it('REST (5.6): GET /api/v1/functions → {functions}, GET /api/v1/workers → {workers}, POST /api/v1/events starts runs', async () => {
    const fnId = uid('rest-fn');
    const event = uid('rest.ev');
    await registerPull(fnId, event);
    const worker = workerId();
    expect((await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, { worker_id: worker, function_ids: [fnId], max_concurrent_jobs: 10, labels: {} })).status).toBe(200);

    const fns = await rest(engine.url, 'GET', '/api/v1/functions');
    expect(fns.status).toBe(200);
    expect(fns.json.functions.map((f: any) => f.id)).toContain(fnId);
    const workers = await rest(engine.url, 'GET', '/api/v1/workers');
    expect(workers.status).toBe(200);
    expect(workers.json.workers.map((w: any) => w.id)).toContain(worker);

    const ev = await rest(engine.url, 'POST', '/api/v1/events', { name: event, data: { from: 'webhook' }, idempotencyKey: uid('wh') });
    expect(ev.status).toBeGreaterThanOrEqual(200);
    expect(ev.status).toBeLessThan(300);
    expect(ev.json.runIds).toHaveLength(1);
    expect((await connect(engine.url, 'GetRun', { id: ev.json.runIds[0] })).json.eventId).toBe(ev.json.eventId);
  });
});
