/**
 * Golden wire tests: the push protocol (WIRE-PROTOCOL.md section 2, with 1.4–1.9).
 *
 * The function endpoint is a raw `http.createServer` that records what the engine POSTs and
 * answers scripted PushResponses; the client side is raw Connect JSON. Nothing here comes from
 * `libs/sdk`.
 */
import { createHmac } from 'node:crypto';
import {
  connect,
  findNulls,
  isIsoTime,
  isoIn,
  PushEndpoint,
  RecordedPush,
  startPushEndpoint,
  startWireEngine,
  uid,
  waitFor,
  waitForRun,
  WIRE_STORES,
  WireEngine,
} from '../support/wire-harness';

const PUSH_REQUEST_KEYS = ['run_id', 'function_id', 'attempt', 'event', 'steps'];
/** Optional top-level keys 2.2 allows (absent, never null). */
const PUSH_REQUEST_OPTIONAL_KEYS = ['resume', 'secrets'];
const EVENT_REQUIRED_KEYS = ['id', 'name', 'data', 'timestamp'];
const EVENT_OPTIONAL_KEYS = ['version', 'idempotency_key', 'source', 'metadata'];

/** Checks one engine → endpoint request against 2.1/2.2 and answers its body. */
function expectPushRequestShape(req: RecordedPush, path: string): any {
  expect(req.method).toBe('POST');
  expect(req.url).toBe(path);
  expect((req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase()).toBe('application/json');
  const body = req.body;
  expect(body).toBeDefined();
  // Only `steps` may be null per 2.2, and the engine should not even do that; every other
  // optional field is absent, never null. User values (event data, step outputs) may hold null.
  expect(findNulls(body).filter((p) => !/^\$\.(event\.data|steps\[\d+\]\.output|resume\.data)/.test(p))).toEqual([]);
  const keys = Object.keys(body);
  for (const k of PUSH_REQUEST_KEYS) expect(keys).toContain(k);
  for (const k of keys) expect([...PUSH_REQUEST_KEYS, ...PUSH_REQUEST_OPTIONAL_KEYS]).toContain(k);
  expect(typeof body.run_id).toBe('string');
  expect(typeof body.function_id).toBe('string');
  expect(Number.isInteger(body.attempt)).toBe(true);
  expect(body.attempt).toBeGreaterThanOrEqual(1);
  expect(Array.isArray(body.steps)).toBe(true);
  const eventKeys = Object.keys(body.event);
  for (const k of EVENT_REQUIRED_KEYS) expect(eventKeys).toContain(k);
  for (const k of eventKeys) expect([...EVENT_REQUIRED_KEYS, ...EVENT_OPTIONAL_KEYS]).toContain(k);
  expect(typeof body.event.id).toBe('string');
  expect(typeof body.event.name).toBe('string');
  expect(isIsoTime(body.event.timestamp)).toBe(true);
  if ('version' in body.event) {
    expect(Number.isInteger(body.event.version)).toBe(true);
    expect(body.event.version).toBeGreaterThanOrEqual(1);
  }
  for (const s of body.steps) {
    for (const k of Object.keys(s)) expect(['id', 'name', 'status', 'output', 'error']).toContain(k);
    expect(['completed', 'failed', 'timed_out']).toContain(s.status);
    if ('error' in s) expect(typeof s.error).toBe('string');
  }
  return body;
}

describe.each(WIRE_STORES)('wire: push protocol (%s)', (store) => {
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

  /** Registers a push function through raw Connect JSON (5.3), as `client.registerFunction` sends it. */
  async function registerPush(fnId: string, event: string, extra: Record<string, unknown> = {}) {
    const res = await connect(engine.url, 'RegisterFunction', {
      id: fnId,
      preferredMode: 'push',
      endpointUrl: `${endpoint.base}/api/ironflow/${fnId}`,
      triggers: [{ event }],
      ...extra,
    });
    expect(res.status).toBe(200);
    expect(res.json.created).toBe(true);
    return `/api/ironflow/${fnId}`;
  }

  async function trigger(event: string, data: unknown): Promise<{ eventId: string; runId: string }> {
    const res = await connect(engine.url, 'Trigger', { event, data });
    expect(res.status).toBe(200);
    expect(res.json.runIds).toHaveLength(1);
    return { eventId: res.json.eventId, runId: res.json.runIds[0] };
  }

  it('POSTs a strict PushRequest, resumes a yielded sleep with the memoized steps, and completes with `result`', async () => {
    const fnId = uid('push-sleep');
    const event = uid('order.placed');
    const path = await registerPush(fnId, event);
    let until = '';
    endpoint.script(fnId, (req, n) => {
      const runId = req.body.run_id;
      if (n === 0) {
        until = isoIn(100);
        return {
          body: {
            status: 'yielded',
            steps: [{ id: `${runId}:a:0`, name: 'a', type: 'invoke', status: 'completed', started_at: isoIn(-5), ended_at: isoIn(0), duration_ms: 5, output: { x: 1 } }],
            yield: { type: 'sleep', step_id: `${runId}:nap:0`, until },
          },
        };
      }
      return { body: { status: 'completed', result: { total: 3, items: ['x', 'y'] }, steps: [] } };
    });
    const data = { orderId: 'o-1', amount: 12.5, tags: ['a', 'b'], nested: { ok: true } };
    const { eventId, runId } = await trigger(event, data);

    const run = await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    expect(run.output).toEqual({ total: 3, items: ['x', 'y'] });
    expect(findNulls(run)).toEqual([]);

    const reqs = endpoint.requestsFor(fnId);
    expect(reqs).toHaveLength(2);

    // First segment: nothing memoized yet.
    const first = expectPushRequestShape(reqs[0], path);
    expect(Object.keys(first).sort()).toEqual([...PUSH_REQUEST_KEYS].sort());
    expect(first.run_id).toBe(runId);
    expect(first.function_id).toBe(fnId);
    expect(first.attempt).toBe(1);
    expect(first.event.id).toBe(eventId);
    expect(first.event.name).toBe(event);
    expect(first.event.data).toEqual(data);
    expect(first.steps).toEqual([]);

    // Second segment: after the sleep's `until`, same attempt, the step.run result and the sleep
    // handed back as completed rows (1.6: sleep resumes via `resume` or a completed row).
    const second = expectPushRequestShape(reqs[1], path);
    expect(reqs[1].at).toBeGreaterThanOrEqual(Date.parse(until) - 20);
    expect(second.run_id).toBe(runId);
    expect(second.function_id).toBe(fnId);
    expect(second.attempt).toBe(1);
    expect(second.event).toEqual(first.event);
    if ('resume' in second) expect(second.resume).toEqual({ step_id: `${runId}:nap:0`, type: 'sleep' });
    expect(second.steps).toHaveLength(2);
    const a = second.steps.find((s: any) => s.id === `${runId}:a:0`);
    expect(a).toEqual({ id: `${runId}:a:0`, name: 'a', status: 'completed', output: { x: 1 } });
    const nap = second.steps.find((s: any) => s.id === `${runId}:nap:0`);
    expect(nap).toBeDefined();
    expect(nap.name).toBe('nap');
    expect(nap.status).toBe('completed');
  });

  it('a failed PushResponse with retryable:false fails the run at once and keeps error.message', async () => {
    const fnId = uid('push-fail');
    const event = uid('payment.requested');
    await registerPush(fnId, event);
    endpoint.script(fnId, () => ({
      body: { status: 'failed', error: { message: 'card declined: insufficient funds', code: 'NON_RETRYABLE', retryable: false }, steps: [] },
    }));
    const { runId } = await trigger(event, { card: '4242' });

    const run = await waitForRun(engine.url, runId, (r) => r.status === 'failed');
    expect(run.error.message).toBe('card declined: insufficient funds');
    expect(run.error.code).toBe('NON_RETRYABLE');
    expect(run.attempt).toBe(1);
    expect('output' in run).toBe(false);
    expect(findNulls(run)).toEqual([]);
    // Non-retryable: no second attempt. The failure is the run's outcome, committed in the same
    // unit of work as the report (a retry would have requeued the run instead of ending it), and an
    // ended run is never dispatched again, so one request is all there will ever be.
    expect(endpoint.requestsFor(fnId)).toHaveLength(1);
  });

  it('a failed PushResponse with retryable:true is retried with `attempt` 2 for the same run and event', async () => {
    const fnId = uid('push-retry');
    const event = uid('sync.requested');
    await registerPush(fnId, event, { retry: { maxAttempts: 2, initialDelayMs: 50, backoffFactor: 1, maxDelayMs: 1000 } });
    endpoint.script(fnId, (_req, n) =>
      n === 0
        ? { body: { status: 'failed', error: { message: 'upstream 503', code: 'ERROR', retryable: true }, steps: [] } }
        : { body: { status: 'completed', result: 'done', steps: [] } },
    );
    const { eventId, runId } = await trigger(event, {});

    const run = await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    expect(run.output).toBe('done');
    expect(run.attempt).toBe(2);
    const reqs = endpoint.requestsFor(fnId);
    expect(reqs).toHaveLength(2);
    expect(reqs.map((r) => r.body.attempt)).toEqual([1, 2]);
    expect(reqs.map((r) => r.body.run_id)).toEqual([runId, runId]);
    expect(reqs.map((r) => r.body.event.id)).toEqual([eventId, eventId]);
  });

  it('a completed PushResponse without `result` completes the run with no output', async () => {
    const fnId = uid('push-void');
    const event = uid('noop');
    await registerPush(fnId, event);
    endpoint.script(fnId, () => ({ body: { status: 'completed', steps: [] } }));
    const { runId } = await trigger(event, {});
    const run = await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    expect(findNulls(run)).toEqual([]);
    expect(run.output).toBeUndefined();
  });

  it('two runs of one function each get their own request with their own event data', async () => {
    const fnId = uid('push-two');
    const event = uid('two');
    await registerPush(fnId, event);
    endpoint.script(fnId, () => ({ body: { status: 'completed', result: { ok: true }, steps: [] } }));
    const one = await trigger(event, { n: 1 });
    const two = await trigger(event, { n: 2 });
    await waitForRun(engine.url, one.runId, (r) => r.status === 'completed');
    await waitForRun(engine.url, two.runId, (r) => r.status === 'completed');
    await waitFor('two requests', async () => endpoint.requestsFor(fnId).length === 2);
    const byRun = new Map(endpoint.requestsFor(fnId).map((r) => [r.body.run_id, r.body]));
    expect(byRun.get(one.runId)?.event.data).toEqual({ n: 1 });
    expect(byRun.get(two.runId)?.event.data).toEqual({ n: 2 });
  });

  it('an emitted event\'s `version` and `metadata` reach the request\'s `event`; an event without metadata has no `metadata` key', async () => {
    const fnId = uid('push-meta');
    const event = uid('meta');
    const path = await registerPush(fnId, event);
    endpoint.script(fnId, () => ({ body: { status: 'completed', result: 'ok', steps: [] } }));
    const emitted = await connect(engine.url, 'Trigger', { event, data: { n: 1 }, version: 2, metadata: { src: 'x' } });
    expect(emitted.status).toBe(200);
    await waitForRun(engine.url, emitted.json.runIds[0], (r) => r.status === 'completed');
    const plain = await trigger(event, {});
    await waitForRun(engine.url, plain.runId, (r) => r.status === 'completed');
    const [withFields, without] = endpoint.requestsFor(fnId).map((r) => expectPushRequestShape(r, path));
    expect(withFields.event).toStrictEqual({ id: emitted.json.eventId, name: event, data: { n: 1 }, timestamp: withFields.event.timestamp, version: 2, metadata: { src: 'x' } });
    expect(without.event).toStrictEqual({ id: plain.eventId, name: event, data: {}, timestamp: without.event.timestamp, version: 1 });
  });

  it('waitForEvent: a matching event resumes the run; the next request carries the step completed with the event object', async () => {
    const fnId = uid('push-wait');
    const event = uid('approval.requested');
    const awaited = uid('approval.given');
    const path = await registerPush(fnId, event);
    endpoint.script(fnId, (req, n) => {
      const runId = req.body.run_id;
      if (n === 0) {
        return { body: { status: 'yielded', steps: [], yield: { type: 'wait_for_event', step_id: `${runId}:approval:0`, event_filter: { event: awaited, match: 'data.requestId', timeout: '1h' } } } };
      }
      return { body: { status: 'completed', result: { approvedBy: 'ann' }, steps: [] } };
    });
    const { runId } = await trigger(event, { requestId: 'r-1' });
    await waitForRun(engine.url, runId, (r) => r.status === 'waiting');

    // An event whose data.requestId differs does not match.
    // The trigger matches waits in its own unit of work (a match would have requeued the run
    // before it answered), so once it answered, the run still waiting is the final word.
    expect((await connect(engine.url, 'Trigger', { event: awaited, data: { requestId: 'r-2', by: 'bob' } })).status).toBe(200);
    expect(endpoint.requestsFor(fnId)).toHaveLength(1);
    expect((await connect(engine.url, 'GetRun', { id: runId })).json.status).toBe('waiting');

    const match = await connect(engine.url, 'Trigger', { event: awaited, data: { requestId: 'r-1', by: 'ann' } });
    expect(match.status).toBe(200);
    await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    const reqs = endpoint.requestsFor(fnId);
    expect(reqs).toHaveLength(2);
    const second = expectPushRequestShape(reqs[1], path);
    if ('resume' in second) expect(second.resume).toMatchObject({ step_id: `${runId}:approval:0`, type: 'wait_for_event' });
    const step = second.steps.find((s: any) => s.id === `${runId}:approval:0`);
    expect(step).toMatchObject({ name: 'approval', status: 'completed' });
    // 1.3: the memoized value is the event object, raw, and must be truthy.
    expect(step.output).toMatchObject({ id: match.json.eventId, name: awaited, data: { requestId: 'r-1', by: 'ann' } });
    expect(isIsoTime(step.output.timestamp)).toBe(true);
  });

  it('step.invoke: the child gets its own push request with the input as event data; the parent resumes with the child output', async () => {
    const parentId = uid('push-parent');
    const childId = uid('push-child');
    const event = uid('invoke.start');
    const parentPath = await registerPush(parentId, event);
    const childPath = await registerPush(childId, uid('child.never'));
    endpoint.script(parentId, (req, n) => {
      const runId = req.body.run_id;
      if (n === 0) {
        return { body: { status: 'yielded', steps: [], yield: { type: 'invoke_function', step_id: `${runId}:${childId}:0`, function_id: childId, input: { q: 2 }, invoke_timeout_ms: 60_000 } } };
      }
      return { body: { status: 'completed', result: 'parent-done', steps: [] } };
    });
    endpoint.script(childId, (req) => ({ body: { status: 'completed', result: { answer: req.body.event.data.q * 2 }, steps: [] } }));
    const { runId } = await trigger(event, {});

    const parent = await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    expect(parent.output).toBe('parent-done');
    const [childReq] = endpoint.requestsFor(childId);
    const child = expectPushRequestShape(childReq, childPath);
    expect(child.function_id).toBe(childId);
    expect(child.attempt).toBe(1);
    expect(child.event.data).toEqual({ q: 2 });
    expect(child.steps).toEqual([]);
    const childRun = (await connect(engine.url, 'GetRun', { id: child.run_id })).json;
    expect(childRun.status).toBe('completed');
    expect(childRun.output).toEqual({ answer: 4 });

    const reqs = endpoint.requestsFor(parentId);
    expect(reqs).toHaveLength(2);
    const second = expectPushRequestShape(reqs[1], parentPath);
    expect(second.steps).toEqual([{ id: `${runId}:${childId}:0`, name: childId, status: 'completed', output: { answer: 4 } }]);
  });

  it('step.invoke of a child that fails: the parent gets the step as failed with a JSON-string error naming the child', async () => {
    const parentId = uid('push-parent-f');
    const childId = uid('push-child-f');
    const event = uid('invoke.fail');
    const parentPath = await registerPush(parentId, event);
    await registerPush(childId, uid('child.never'));
    endpoint.script(parentId, (req, n) => {
      const runId = req.body.run_id;
      if (n === 0) return { body: { status: 'yielded', steps: [], yield: { type: 'invoke_function', step_id: `${runId}:${childId}:0`, function_id: childId, input: {}, invoke_timeout_ms: 60_000 } } };
      return { body: { status: 'failed', error: { message: 'child failed', code: 'INVOKE_FAILED', retryable: false }, steps: [] } };
    });
    endpoint.script(childId, () => ({ body: { status: 'failed', error: { message: 'boom', code: 'NON_RETRYABLE', retryable: false }, steps: [] } }));
    const { runId } = await trigger(event, {});

    await waitForRun(engine.url, runId, (r) => r.status === 'failed');
    const childRunId = endpoint.requestsFor(childId)[0].body.run_id;
    const second = expectPushRequestShape(endpoint.requestsFor(parentId)[1], parentPath);
    expect(second.steps).toHaveLength(1);
    const step = second.steps[0];
    expect(step).toMatchObject({ id: `${runId}:${childId}:0`, name: childId, status: 'failed' });
    expect('output' in step).toBe(false);
    expect(typeof step.error).toBe('string');
    const parsed = JSON.parse(step.error);
    expect(parsed.function_id).toBe(childId);
    expect(parsed.child_run_id).toBe(childRunId);
    expect(parsed.cause ?? parsed.message).toBe('boom');
  });

  it('step.invokeAsync: the parent resumes at once with the step completed as {run_id: <child>}', async () => {
    const parentId = uid('push-parent-a');
    const childId = uid('push-child-a');
    const event = uid('invoke.async');
    const parentPath = await registerPush(parentId, event);
    await registerPush(childId, uid('child.never'));
    endpoint.script(parentId, (req, n) => {
      const runId = req.body.run_id;
      if (n === 0) return { body: { status: 'yielded', steps: [], yield: { type: 'invoke_function_async', step_id: `${runId}:${childId}:0`, function_id: childId, input: { fire: 'forget' } } } };
      return { body: { status: 'completed', result: req.body.steps[0]?.output ?? null, steps: [] } };
    });
    endpoint.script(childId, () => ({ body: { status: 'completed', result: 'child-done', steps: [] } }));
    const { runId } = await trigger(event, {});

    const parent = await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    const second = expectPushRequestShape(endpoint.requestsFor(parentId)[1], parentPath);
    expect(second.steps).toHaveLength(1);
    const step = second.steps[0];
    expect(step).toMatchObject({ id: `${runId}:${childId}:0`, name: childId, status: 'completed' });
    expect(Object.keys(step.output)).toEqual(['run_id']);
    const child = await waitForRun(engine.url, step.output.run_id, (r) => r.status === 'completed');
    expect(child.functionId).toBe(childId);
    expect(child.output).toBe('child-done');
    expect(parent.output).toEqual({ run_id: child.id });
  });

  // Regression (engine bug found by this suite): a step.run that returned `null` is reported as
  // `output: null` (1.4: the key is absent only for `undefined`); the engine used to hand it back
  // without `output` (libs/store/src/rows.ts read SQL NULL and JSON null alike), so the SDK's
  // memo returned `undefined` instead of `null` on replay.
  it('a step output of null is handed back as `output: null`; a step without output comes back without the key', async () => {
    const fnId = uid('push-null');
    const event = uid('null.step');
    const path = await registerPush(fnId, event);
    endpoint.script(fnId, (req, n) => {
      const runId = req.body.run_id;
      if (n === 0) {
        return {
          body: {
            status: 'yielded',
            steps: [
              { id: `${runId}:find:0`, name: 'find', type: 'invoke', status: 'completed', started_at: isoIn(-1), ended_at: isoIn(0), duration_ms: 1, output: null },
              { id: `${runId}:log:0`, name: 'log', type: 'invoke', status: 'completed', started_at: isoIn(-1), ended_at: isoIn(0), duration_ms: 1 },
            ],
            yield: { type: 'sleep', step_id: `${runId}:nap:0`, until: isoIn(50) },
          },
        };
      }
      return { body: { status: 'completed', result: 'ok', steps: [] } };
    });
    const { runId } = await trigger(event, {});
    await waitForRun(engine.url, runId, (r) => r.status === 'completed');
    const second = expectPushRequestShape(endpoint.requestsFor(fnId)[1], path);
    const find = second.steps.find((s: any) => s.id === `${runId}:find:0`);
    const log = second.steps.find((s: any) => s.id === `${runId}:log:0`);
    expect(log).toEqual({ id: `${runId}:log:0`, name: 'log', status: 'completed' });
    expect(find).toEqual({ id: `${runId}:find:0`, name: 'find', status: 'completed', output: null });
  });

  it('a non-200 answer from the endpoint is a transport failure: with no attempts left the run fails with PUSH_DISPATCH_FAILED', async () => {
    const fnId = uid('push-500');
    const event = uid('down');
    await registerPush(fnId, event, { retry: { maxAttempts: 1 } });
    endpoint.script(fnId, () => ({ status: 500, body: { error: { message: 'kaput', code: 'INTERNAL_ERROR' } } }));
    const { runId } = await trigger(event, {});
    const run = await waitForRun(engine.url, runId, (r) => r.status === 'failed');
    expect(run.error.code).toBe('PUSH_DISPATCH_FAILED');
    expect(run.error.message).toContain('500');
    expect(endpoint.requestsFor(fnId)).toHaveLength(1);
  });

  it('the push call is bounded by the function timeout (2.5): a hung endpoint fails the attempt with FUNCTION_TIMED_OUT before it answers', async () => {
    const fnId = uid('push-hang');
    const event = uid('hang');
    await registerPush(fnId, event, { timeoutMs: 300, retry: { maxAttempts: 1 } });
    let answered = false;
    endpoint.script(fnId, () => new Promise((resolve) => setTimeout(() => {
      answered = true;
      resolve({ body: { status: 'completed', result: 'too late', steps: [] } });
    }, 5_000)));
    const { runId } = await trigger(event, {});
    const run = await waitForRun(engine.url, runId, (r) => r.status === 'failed', 4_500);
    expect(answered).toBe(false);
    expect(run.error).toMatchObject({ code: 'FUNCTION_TIMED_OUT', retryable: true });
  });
});

describe.each(WIRE_STORES)('wire: signed push requests (%s)', (store) => {
  const key = 'wire-signing-key-0123456789abcdef';
  let signed: WireEngine;
  let unsigned: WireEngine;
  let endpoint: PushEndpoint;

  beforeAll(async () => {
    endpoint = await startPushEndpoint();
    signed = await startWireEngine(store, { signingKey: key });
    unsigned = await startWireEngine(store);
  });

  afterAll(async () => {
    await signed?.close();
    await unsigned?.close();
    await endpoint?.close();
  });

  async function runOnce(engine: WireEngine, fnId: string): Promise<RecordedPush> {
    const event = uid('signed');
    expect((await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'push', endpointUrl: `${endpoint.base}/hook`, triggers: [{ event }] })).status).toBe(200);
    endpoint.script(fnId, () => ({ body: { status: 'completed', result: 'ok', steps: [] } }));
    const res = await connect(engine.url, 'Trigger', { event, data: { n: 1 } });
    await waitForRun(engine.url, res.json.runIds[0], (r) => r.status === 'completed');
    return endpoint.requestsFor(fnId)[0];
  }

  it('with IRONFLOW_SIGNING_KEY every request carries X-Ironflow-Signature: sha256=<hex HMAC-SHA256(key, raw body)> (2.1)', async () => {
    const req = await runOnce(signed, uid('push-signed'));
    const expected = `sha256=${createHmac('sha256', key).update(Buffer.from(req.raw, 'utf8')).digest('hex')}`;
    expect(req.headers['x-ironflow-signature']).toBe(expected);
    expect(req.headers['x-ironflow-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it('without a signing key requests carry no signature header', async () => {
    const req = await runOnce(unsigned, uid('push-unsigned'));
    expect(req.headers['x-ironflow-signature']).toBeUndefined();
  });
});
