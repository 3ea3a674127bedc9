/**
 * The client RPC transport end to end on one port: raw `fetch` JSON (what the Ironflow SDK sends,
 * WIRE-PROTOCOL.md 5.1-5.5), gRPC with @grpc/grpc-js and Connect binary over h2c, all against
 * `listenOnePort` with an in-memory ClientApi.
 */
import * as http from 'node:http';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { WireType } from '@bufbuild/protobuf/wire';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { EngineError } from '@ironflow/contracts';
import {
  createRpcHandlers,
  IRONFLOW_ERROR_CODE_HEADER,
  IRONFLOW_SERVICE_PATH_PREFIX,
  listenOnePort,
  type OnePortServer,
  v1,
} from './index';
import { FakeClientApi } from './testing/fake-client-api';

interface JsonResponse {
  status: number;
  contentType: string | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

describe('client RPC transport on one port', () => {
  let api: FakeClientApi;
  let server: OnePortServer;
  let baseUrl: string;
  let internalErrors: unknown[];

  beforeEach(async () => {
    api = new FakeClientApi();
    internalErrors = [];
    const handlers = createRpcHandlers(api, undefined, { onError: (err) => internalErrors.push(err) });
    // What the Nest controller does: POST /ironflow.v1.IronflowService/:method → handleUnaryJson.
    const http1: http.RequestListener = (req, res) => {
      const url = req.url ?? '';
      if (req.method !== 'POST' || !url.startsWith(IRONFLOW_SERVICE_PATH_PREFIX)) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('no route');
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const method = url.slice(IRONFLOW_SERVICE_PATH_PREFIX.length).split('?')[0];
        void handlers.handleUnaryJson(method, Buffer.concat(chunks), req.headers).then(({ status, body }) => {
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        });
      });
    };
    server = await listenOnePort({ port: 0, host: '127.0.0.1', http1, http2Handler: handlers.http2Handler });
    baseUrl = `http://127.0.0.1:${server.port}`;
  });

  afterEach(async () => {
    await server.close();
  });

  async function post(method: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonResponse> {
    const res = await fetch(`${baseUrl}${IRONFLOW_SERVICE_PATH_PREFIX}${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: res.status, contentType: res.headers.get('content-type'), body: await res.json() };
  }

  async function registerOrders(mode: 'push' | 'pull' = 'push') {
    const res = await post('RegisterFunction', { id: 'orders', triggers: [{ event: 'order.placed' }], preferredMode: mode });
    expect(res.status).toBe(200);
  }

  describe('HTTP/1.1 JSON (the Ironflow SDK)', () => {
    it('binds to a real port when asked for port 0', () => {
      expect(server.port).toBeGreaterThan(0);
    });

    it('RegisterFunction refuses a key its request does not have, at any depth, by name, before the engine is called (other RPCs still drop them)', async () => {
      const calls = api.calls.length;
      const res = await post('RegisterFunction', { id: 'orders', preferredMode: 'pull', somethingFromTheFuture: { nested: true }, retry: { maxAttemps: 2 }, cancelOn: [{ event: 'stop', matches: 'data.id' }] });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR', message: 'unknown field(s), not options of this engine: somethingFromTheFuture, retry.maxAttemps, cancelOn.0.matches' });
      expect(api.calls.length).toBe(calls);
      expect((await post('GetRun', { id: 'nope', somethingFromTheFuture: 1 })).body.ironflowCode).toBe('RUN_NOT_FOUND');
    });

    it('RegisterFunction over JSON carries recording: false (the none profile) and true to the engine; left out, neither', async () => {
      for (const [recording, expected] of [[false, false], [true, true], [undefined, undefined]] as const) {
        expect((await post('RegisterFunction', { id: 'rec', preferredMode: 'pull', ...(recording !== undefined ? { recording } : {}) })).status).toBe(200);
        expect(api.lastCall('registerFunction')?.input).toEqual(expect.objectContaining({ id: 'rec' }));
        expect((api.lastCall('registerFunction')?.input as { recording?: boolean }).recording).toBe(expected);
      }
    });

    it('RegisterFunction accepts camelCase keys, preferredMode "push" and carries debounce with max_wait_ms (our field 100) to the engine', async () => {
      const res = await post('RegisterFunction', {
        id: 'orders',
        name: 'Orders',
        triggers: [{ event: 'order.placed', expression: 'event.data.total > 10' }],
        retry: { maxAttempts: 5 },
        timeoutMs: 90000,
        concurrency: { limit: 2, key: 'event.data.customer' },
        preferredMode: 'push',
        endpointUrl: 'http://app.local/api/ironflow',
        cancelOn: [{ event: 'order.cancelled', match: 'data.orderId' }],
        metadata: { __ironflow_code_hash: '0123456789abcdef' },
        debounce: { period_ms: 1000, key: '', max_wait_ms: 5000 },
      });

      expect(res.status).toBe(200);
      expect(res.body.created).toBe(true);
      expect(res.body.function).toMatchObject({
        id: 'orders',
        name: 'Orders',
        preferredMode: 'EXECUTION_MODE_PUSH',
        status: 'FUNCTION_STATUS_ACTIVE',
        version: 1,
        timeoutMs: 90000,
        endpointUrl: 'http://app.local/api/ironflow',
        retry: { maxAttempts: 5, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300000 },
        concurrency: { limit: 2, key: 'event.data.customer' },
        triggers: [{ event: 'order.placed', expression: 'event.data.total > 10', cron: '' }],
        cancelOn: [{ event: 'order.cancelled', match: 'data.orderId' }],
        metadata: { __ironflow_code_hash: '0123456789abcdef' },
      });
      expect(api.lastCall('registerFunction')?.input).toEqual({
        id: 'orders',
        name: 'Orders',
        mode: 'push',
        endpointUrl: 'http://app.local/api/ironflow',
        triggers: [{ event: 'order.placed', expression: 'event.data.total > 10' }],
        retry: { maxAttempts: 5, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300000 },
        timeoutMs: 90000,
        concurrency: { limit: 2, key: 'event.data.customer' },
        cancelOn: [{ event: 'order.cancelled', match: 'data.orderId' }],
        metadata: { __ironflow_code_hash: '0123456789abcdef' },
        debounce: { periodMs: 1000, maxWaitMs: 5000 },
      });
    });

    it('RegisterFunction accepts snake_case keys and the enum name the worker sends', async () => {
      const res = await post('RegisterFunction', {
        id: 'billing',
        preferred_mode: 'EXECUTION_MODE_PULL',
        timeout_ms: 1500,
        endpoint_url: '',
        cancel_on: [{ event: 'stop' }],
        retry: { max_attempts: 2, initial_delay_ms: 10, backoff_factor: 1.5, max_delay_ms: 20 },
        triggers: [],
      });
      expect(res.status).toBe(200);
      expect(api.lastCall('registerFunction')?.input).toEqual({
        id: 'billing',
        mode: 'pull',
        timeoutMs: 1500,
        triggers: [],
        cancelOn: [{ event: 'stop' }],
        retry: { maxAttempts: 2, initialDelayMs: 10, backoffFactor: 1.5, maxDelayMs: 20 },
      });
      expect(res.body.function.preferredMode).toBe('EXECUTION_MODE_PULL');
    });

    it.each([
      ['pull', 'pull'],
      ['PUSH', 'push'],
      ['execution_mode_pull', 'pull'],
      [1, 'push'],
      [2, 'pull'],
    ])('RegisterFunction accepts preferredMode alias %p', async (alias, mode) => {
      const res = await post('RegisterFunction', { id: 'f', preferredMode: alias });
      expect(res.status).toBe(200);
      expect((api.lastCall('registerFunction')?.input as { mode: string }).mode).toBe(mode);
    });

    it('RegisterFunction rejects an enum value that matches no alias with 400 invalid_argument', async () => {
      const res = await post('RegisterFunction', { id: 'f', preferredMode: 'sideways' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });
      expect(res.body.message).toContain('preferredMode');
      expect(api.calls).toHaveLength(0);
    });

    it('Trigger passes event, data and idempotency key, and scopes the call by X-Ironflow-Environment', async () => {
      await registerOrders();
      const res = await post(
        'Trigger',
        { event: 'order.placed', data: { total: 12 }, idempotency_key: 'k-1', version: 2, metadata: { source: 'test' } },
        { 'X-Ironflow-Environment': 'staging' },
      );
      expect(res.status).toBe(200);
      expect(res.contentType).toBe('application/json');
      expect(res.body).toEqual({ runIds: ['run_0002'], eventId: 'evt_0001', debouncedFunctionIds: [], duplicate: false });
      expect(api.lastCall('trigger')).toEqual({
        method: 'trigger',
        scope: { project: 'default', env: 'staging' },
        input: { event: 'order.placed', data: { total: 12 }, idempotencyKey: 'k-1', version: 2, metadata: { source: 'test' } },
      });
    });

    it('Trigger without a matching function answers runIds: [] and uses the default environment', async () => {
      const res = await post('Trigger', { event: 'nobody.listens' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ runIds: [], eventId: 'evt_0001', debouncedFunctionIds: [], duplicate: false });
      expect(api.lastCall('trigger')?.scope).toEqual({ project: 'default', env: 'default' });
      expect(api.lastCall('trigger')?.input).toEqual({ event: 'nobody.listens', data: {} });
    });

    it('Emit behaves like Trigger', async () => {
      await registerOrders();
      const res = await post('Emit', { event: 'order.placed', data: {} });
      expect(res.body.runIds).toEqual(['run_0002']);
    });

    it('GetRun emits default-valued fields, lowercase status, and leaves missing optional fields absent (not null)', async () => {
      await registerOrders();
      const { body: trig } = await post('Trigger', { event: 'order.placed', data: { total: 1 } });
      const res = await post('GetRun', { id: trig.runIds[0] });

      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: 'run_0002',
        functionId: 'orders',
        eventId: 'evt_0001',
        executionMode: 'EXECUTION_MODE_PUSH',
        workerId: '',
        actorId: '',
        input: { total: 1 },
        status: 'waiting_for_capacity',
        attempt: 0,
        maxAttempts: 3,
        createdAt: '2025-01-02T03:04:05.678Z',
        updatedAt: '2025-01-02T03:04:05.678Z',
        pauseRequested: false,
        pauseReason: '',
        functionVersion: 1,
      });
      for (const key of ['output', 'error', 'startedAt', 'endedAt', 'parentRunId', 'parentStepId']) {
        expect(key in res.body).toBe(false);
      }
    });

    it('GetRun of a failed run answers status "failed" with the error, and a non-object output as is', async () => {
      await registerOrders();
      const failed = await post('Trigger', { event: 'order.placed', data: { fail: true } });
      const done = await post('Trigger', { event: 'order.placed', data: { output: 42 } });

      const f = await post('GetRun', { id: failed.body.runIds[0] });
      expect(f.body.status).toBe('failed');
      expect(f.body.attempt).toBe(1);
      expect(f.body.error).toEqual({
        message: 'boom',
        code: 'INVOKE_FAILED',
        stack: '',
        retryable: false,
        details: { child_run_id: 'run_child' },
      });
      expect(f.body.endedAt).toBe('2025-01-02T03:04:06Z');

      const d = await post('GetRun', { id: done.body.runIds[0] });
      expect(d.body.status).toBe('completed');
      expect(d.body.output).toBe(42);
    });

    it('GetRun of an unknown run answers 404 with the Connect code and our code', async () => {
      const res = await post('GetRun', { id: 'run_missing' });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({
        code: 'not_found',
        message: 'run run_missing not found',
        ironflowCode: 'RUN_NOT_FOUND',
      });
      expect(res.body.details).toEqual([
        expect.objectContaining({
          type: 'ironflow.v1.EngineErrorInfo',
          debug: { code: 'RUN_NOT_FOUND', details: { run_id: 'run_missing' } },
        }),
      ]);
      const info = fromBinary(v1.EngineErrorInfoSchema, Buffer.from(res.body.details[0].value, 'base64'));
      expect(info.code).toBe('RUN_NOT_FOUND');
    });

    it('TriggerSync answers results[] with lowercase statuses and reads timeout_ms', async () => {
      await registerOrders();
      const res = await post('TriggerSync', { event: 'order.placed', data: { fail: true }, timeout_ms: 1000 });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        eventId: 'evt_0001',
        results: [
          {
            runId: 'run_0002',
            functionId: 'orders',
            status: 'failed',
            error: { message: 'boom', code: 'INVOKE_FAILED', stack: '', retryable: false, details: { child_run_id: 'run_child' } },
            durationMs: 1234,
          },
        ],
      });
      expect(api.lastCall('triggerSync')?.input).toEqual({ event: 'order.placed', data: { fail: true }, timeoutMs: 1000 });

      // Both spellings of one field: the camelCase one wins.
      const ok = await post('TriggerSync', { event: 'order.placed', data: { output: { shipped: true } }, timeoutMs: 5, timeout_ms: 9 });
      expect(api.lastCall('triggerSync')?.input).toMatchObject({ timeoutMs: 5 });
      expect(ok.body.results[0]).toMatchObject({ status: 'completed', output: { shipped: true } });
      expect('error' in ok.body.results[0]).toBe(false);
    });

    it('a negative timeout_ms is refused, never waited as the default: TriggerSync and InvokeFunctionSync answer VALIDATION_ERROR, RegisterFunction hands it to the engine (which refuses it as REST does)', async () => {
      await registerOrders();
      for (const method of ['TriggerSync', 'InvokeFunctionSync']) {
        const body = method === 'TriggerSync' ? { event: 'order.placed', data: {}, timeoutMs: -5 } : { functionId: 'orders', input: {}, timeout_ms: -5 };
        const res = await post(method, body);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR', message: expect.stringContaining('timeout_ms: a wait in ms, at least 1') });
      }
      expect(api.lastCall('triggerSync')).toBeUndefined();
      expect(api.lastCall('invokeFunctionSync')).toBeUndefined();

      await post('RegisterFunction', { id: 'negative', triggers: [{ event: 'x' }], timeoutMs: -5 });
      expect(api.lastCall('registerFunction')?.input).toMatchObject({ id: 'negative', timeoutMs: -5 });
    });

    it('TriggerSync always answers results, even when no run started', async () => {
      const res = await post('TriggerSync', { event: 'nobody.listens', data: {} });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ eventId: 'evt_0001', results: [] });
    });

    it('ListRuns accepts status in lowercase and as RUN_STATUS_*, and function_id in snake_case', async () => {
      await registerOrders();
      await post('Trigger', { event: 'order.placed', data: { fail: true } });
      await post('Trigger', { event: 'order.placed', data: {} });

      const lower = await post('ListRuns', { function_id: 'orders', status: 'failed', limit: 10 });
      expect(lower.status).toBe(200);
      expect(lower.body.runs.map((r: { status: string }) => r.status)).toEqual(['failed']);
      expect(lower.body).toMatchObject({ nextCursor: '', totalCount: 1 });
      expect(api.lastCall('listRuns')?.input).toEqual({ functionId: 'orders', status: 'failed', limit: 10 });

      const upper = await post('ListRuns', { functionId: 'orders', status: 'RUN_STATUS_WAITING_FOR_CAPACITY' });
      expect(upper.body.runs.map((r: { status: string }) => r.status)).toEqual(['waiting_for_capacity']);

      const all = await post('ListRuns', {});
      expect(all.body.totalCount).toBe(2);
      expect(api.lastCall('listRuns')?.input).toEqual({});

      const bad = await post('ListRuns', { status: 'pending' });
      expect(bad.status).toBe(400);
      expect(bad.body.ironflowCode).toBe('VALIDATION_ERROR');
    });

    it('ListRuns refuses the filters it does not act on (since, until) and a negative limit, by name', async () => {
      const calls = api.calls.length;
      const timed = await post('ListRuns', { since: '2026-01-01T00:00:00Z', until: '2026-01-02T00:00:00Z' });
      expect(timed.status).toBe(400);
      expect(timed.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });
      expect(timed.body.message).toMatch(/^since, until: not supported by this engine/);
      const negative = await post('ListRuns', { limit: -5 });
      expect(negative.status).toBe(400);
      expect(negative.body.message).toBe('limit: 0 (the default page, 50) or more, not -5');
      expect(api.calls.length).toBe(calls);
    });

    it('CancelRun answers the cancelled run; cancelling a terminal run is failed_precondition with its Connect status 400', async () => {
      await registerOrders();
      const { body: trig } = await post('Trigger', { event: 'order.placed', data: {} });
      const res = await post('CancelRun', { id: trig.runIds[0], reason: 'customer asked' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: trig.runIds[0], status: 'cancelled', error: { message: 'customer asked', code: 'CANCELLED' } });

      const again = await post('CancelRun', { id: trig.runIds[0] });
      expect(again.status).toBe(400);
      expect(again.body).toMatchObject({ code: 'failed_precondition', ironflowCode: 'RUN_NOT_RUNNING' });
      expect(api.lastCall('cancelRun')?.input).toEqual({ id: trig.runIds[0], reason: '' });
    });

    it('GetRunSteps renders steps (lowercase engine type and status), history and children', async () => {
      await registerOrders();
      const { body: trig } = await post('Trigger', { event: 'order.placed', data: {} });
      const parentId = trig.runIds[0];
      api.steps.set(parentId, [
        { id: 's1', name: 'charge', type: 'run', status: 'completed', output: 'ok', sequence: 1, createdAt: '2025-01-01T00:00:00.000Z', startedAt: '2024-12-31T23:59:59.500Z', endedAt: '2025-01-01T00:00:00.000Z' },
        { id: 's2', name: 'child', type: 'invoke', status: 'waiting', childRunId: 'run_child', sequence: 2, createdAt: '2025-01-01T00:00:01.000Z', startedAt: '2025-01-01T00:00:01.000Z' },
      ]);
      api.runs.set('run_child', { ...api.runs.get(parentId)!, id: 'run_child', status: 'running', parentRunId: parentId, parentStepId: 's2' });

      const res = await post('GetRunSteps', { id: parentId });
      expect(res.status).toBe(200);
      expect(res.body.steps).toEqual([
        { id: 's1', name: 'charge', type: 'run', status: 'completed', output: 'ok', sequence: 1, createdAt: '2025-01-01T00:00:00Z', startedAt: '2024-12-31T23:59:59.500Z', endedAt: '2025-01-01T00:00:00Z', injected: false },
        { id: 's2', name: 'child', type: 'invoke', status: 'waiting', childRunId: 'run_child', sequence: 2, createdAt: '2025-01-01T00:00:01Z', startedAt: '2025-01-01T00:00:01Z', injected: false },
      ]);
      expect(res.body.history).toEqual([{ eventType: 'run.created', data: ['a', 1], ts: '2025-01-02T03:04:05.678Z' }]);
      expect(res.body.children).toHaveLength(1);
      expect(res.body.children[0]).toMatchObject({ id: 'run_child', status: 'running', parentRunId: parentId, parentStepId: 's2' });
    });

    it('ListFunctions and Health accept an empty body', async () => {
      await registerOrders('pull');
      const fns = await fetch(`${baseUrl}${IRONFLOW_SERVICE_PATH_PREFIX}ListFunctions`, { method: 'POST' });
      expect(fns.status).toBe(200);
      const body = (await fns.json()) as { functions: { id: string; preferredMode: string }[] };
      expect(body.functions.map((f: { id: string; preferredMode: string }) => [f.id, f.preferredMode])).toEqual([
        ['orders', 'EXECUTION_MODE_PULL'],
      ]);
      expect(await post('Health', '')).toMatchObject({ status: 200, body: { status: 'ok' } });
    });

    it('malformed JSON is 400 invalid_argument / INVALID_JSON; a non-object body is VALIDATION_ERROR', async () => {
      const res = await post('GetRun', '{"id": ');
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'INVALID_JSON' });
      expect(typeof res.body.message).toBe('string');

      const arr = await post('GetRun', '[1,2]');
      expect(arr.status).toBe(400);
      expect(arr.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });

      const wrongType = await post('ListRuns', { limit: 'many' });
      expect(wrongType.status).toBe(400);
      expect(wrongType.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' });
      expect(api.calls).toHaveLength(0);
    });

    it('an unknown method is 404 unimplemented', async () => {
      const res = await post('PatchStep', { step_id: 'x' });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('unimplemented');
      expect(res.body.ironflowCode).toBeUndefined();
    });

    it('an unexpected error is 500 internal without its message, and is reported to onError', async () => {
      api.failWith = new Error('connection to db refused at 10.0.0.1');
      const res = await post('GetRun', { id: 'x' });
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ code: 'internal', message: 'internal error', ironflowCode: 'INTERNAL_ERROR' });
      expect(internalErrors).toEqual([api.failWith]);
    });

    it('engine errors answer their Connect code with the HTTP status the Connect protocol maps it to: 429 resource_exhausted (PAYLOAD_TOO_LARGE), 401 unauthenticated', async () => {
      api.failWith = new EngineError('PAYLOAD_TOO_LARGE', 'event data too large');
      const big = await post('Trigger', { event: 'e' });
      expect(big.status).toBe(429);
      expect(big.body).toMatchObject({ code: 'resource_exhausted', message: 'event data too large', ironflowCode: 'PAYLOAD_TOO_LARGE' });

      api.failWith = new EngineError('UNAUTHENTICATED', 'bad key');
      const auth = await post('Trigger', { event: 'e' });
      expect(auth.status).toBe(401);
      expect(auth.body).toMatchObject({ code: 'unauthenticated', message: 'bad key', ironflowCode: 'UNAUTHENTICATED' });
      expect(internalErrors).toEqual([]);
    });

    it('a drain (UNAVAILABLE) is 503 unavailable, the retryable Connect code, with the run ids in the details', async () => {
      api.failWith = new EngineError('UNAVAILABLE', 'the engine is shutting down before the outcome: run r-1 (orders) is running', { runIds: ['r-1'] });
      const res = await post('TriggerSync', { event: 'e' });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: 'unavailable', ironflowCode: 'UNAVAILABLE', details: [expect.objectContaining({ debug: { code: 'UNAVAILABLE', details: { runIds: ['r-1'] } } })] });
    });

    it('routes other HTTP/1.1 traffic to the HTTP/1 server', async () => {
      const res = await fetch(`${baseUrl}/api/v1/functions`);
      expect(res.status).toBe(404);
      expect(await res.text()).toBe('no route');
    });
  });

  describe('gRPC (@grpc/grpc-js, h2c on the same port)', () => {
    let client: grpc.Client;

    beforeEach(() => {
      client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    });

    afterEach(() => client.close());

    function getRun(id: string, metadata = new grpc.Metadata()): Promise<v1.Run> {
      return new Promise((resolve, reject) => {
        client.makeUnaryRequest(
          `${IRONFLOW_SERVICE_PATH_PREFIX}GetRun`,
          (req: v1.GetRunRequest) => Buffer.from(toBinary(v1.GetRunRequestSchema, req)),
          (buf: Buffer) => fromBinary(v1.RunSchema, buf),
          create(v1.GetRunRequestSchema, { id }),
          metadata,
          (err, res) => (err ? reject(err) : resolve(res!)),
        );
      });
    }

    it('GetRun answers the run as protobuf with the RunStatus enum and timestamps', async () => {
      await registerOrders();
      const { body: trig } = await post('Trigger', { event: 'order.placed', data: { fail: true } });

      const metadata = new grpc.Metadata();
      metadata.set('x-ironflow-environment', 'prod');
      const run = await getRun(trig.runIds[0], metadata);

      expect(run.id).toBe(trig.runIds[0]);
      expect(run.functionId).toBe('orders');
      expect(run.status).toBe(v1.RunStatus.FAILED);
      expect(run.executionMode).toBe(v1.ExecutionMode.PUSH);
      expect(run.attempt).toBe(1);
      expect(run.maxAttempts).toBe(3);
      expect(run.error?.message).toBe('boom');
      expect(run.error?.code).toBe('INVOKE_FAILED');
      expect(run.error?.details).toEqual({ child_run_id: 'run_child' });
      expect(run.input).toEqual({ fail: true });
      expect(timestampDate(run.createdAt!).toISOString()).toBe('2025-01-02T03:04:05.678Z');
      expect(run.output).toBeUndefined();
      expect(api.lastCall('getRun')?.scope).toEqual({ project: 'default', env: 'prod' });
    });

    it('a drain answers gRPC UNAVAILABLE (retryable) naming the run, with our code in the trailers', async () => {
      api.failWith = new EngineError('UNAVAILABLE', 'the engine is shutting down before the outcome: run r-1 (orders) is running');
      const err = (await getRun('r-1').catch((e) => e)) as grpc.ServiceError;
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.details).toContain('run r-1 (orders) is running');
      expect(err.metadata.get(IRONFLOW_ERROR_CODE_HEADER)).toEqual(['UNAVAILABLE']);
    });

    it('GetRun of an unknown run fails with NOT_FOUND and our code in the trailers', async () => {
      const err = (await getRun('run_missing').catch((e) => e)) as grpc.ServiceError;
      expect(err.code).toBe(grpc.status.NOT_FOUND);
      expect(err.details).toBe('run run_missing not found');
      expect(err.metadata.get(IRONFLOW_ERROR_CODE_HEADER)).toEqual(['RUN_NOT_FOUND']);
    });
  });

  describe('Connect binary (@connectrpc/connect-node, HTTP/2)', () => {
    function connectClient() {
      const transport = createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true });
      return createClient(v1.IronflowService, transport);
    }

    it('Trigger, GetRun and TriggerSync round-trip as binary protobuf', async () => {
      const client = connectClient();
      const reg = await client.registerFunction({
        id: 'orders',
        triggers: [{ event: 'order.placed' }],
        preferredMode: v1.ExecutionMode.PULL,
      });
      expect(reg.created).toBe(true);
      expect(reg.function?.preferredMode).toBe(v1.ExecutionMode.PULL);

      const trig = await client.trigger(
        { event: 'order.placed', data: { output: [1, 2] } },
        { headers: { 'x-ironflow-environment': 'blue' } },
      );
      expect(trig.runIds).toEqual(['run_0002']);
      expect(api.lastCall('trigger')?.scope).toEqual({ project: 'default', env: 'blue' });

      const run = await client.getRun({ id: 'run_0002' });
      expect(run.status).toBe(v1.RunStatus.COMPLETED);
      expect(run.executionMode).toBe(v1.ExecutionMode.PULL);
      // A Struct holds only objects: the array output travels wrapped.
      expect(run.output).toEqual({ value: [1, 2] });

      const sync = await client.triggerSync({ event: 'order.placed', data: { fail: true }, timeoutMs: 50 });
      expect(sync.results).toHaveLength(1);
      expect(sync.results[0].status).toBe(v1.RunStatus.FAILED);
      expect(sync.results[0].durationMs).toBe(1234);
      expect(api.lastCall('triggerSync')?.input).toMatchObject({ timeoutMs: 50 });
    });

    it('RegisterFunction carries recording: false (the none profile), true, and left out neither, as binary protobuf', async () => {
      for (const [recording, expected] of [[false, false], [true, true], [undefined, undefined]] as const) {
        await connectClient().registerFunction({ id: 'rec', preferredMode: v1.ExecutionMode.PULL, ...(recording !== undefined ? { recording } : {}) });
        expect((api.lastCall('registerFunction')?.input as { recording?: boolean }).recording).toBe(expected);
      }
    });

    it('RegisterFunction refuses fields its schema does not have, at any depth, naming their numbers (VALIDATION_ERROR), and registers nothing', async () => {
      const calls = api.calls.length;
      const unknown = (no: number) => [{ no, wireType: WireType.Varint, data: new Uint8Array([1]) }];
      const req = create(v1.RegisterFunctionRequestSchema, { id: 'orders', triggers: [create(v1.TriggerSchema, { event: 'order.placed' })], retry: { maxAttempts: 2 } });
      req.$unknown = unknown(14);
      req.triggers[0].$unknown = unknown(7);
      req.retry!.$unknown = unknown(9);
      const err = (await connectClient().registerFunction(req).catch((e) => e)) as ConnectError;
      expect(err).toBeInstanceOf(ConnectError);
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.metadata.get(IRONFLOW_ERROR_CODE_HEADER)).toBe('VALIDATION_ERROR');
      expect(err.rawMessage).toBe('unknown field(s), not options of this engine: #14, triggers.0.#7, retry.#9');
      expect(api.calls.length).toBe(calls);
      // Other RPCs read what they know and leave the rest (as over JSON).
      const run = create(v1.GetRunRequestSchema, { id: 'run_missing' });
      run.$unknown = unknown(9);
      expect(((await connectClient().getRun(run).catch((e) => e)) as ConnectError).metadata.get(IRONFLOW_ERROR_CODE_HEADER)).toBe('RUN_NOT_FOUND');
    });

    it('an engine error arrives as a ConnectError with its code, our code and an EngineErrorInfo detail', async () => {
      const err = (await connectClient()
        .getRun({ id: 'run_missing' })
        .catch((e) => e)) as ConnectError;
      expect(err).toBeInstanceOf(ConnectError);
      expect(err.code).toBe(Code.NotFound);
      expect(err.rawMessage).toBe('run run_missing not found');
      expect(err.metadata.get(IRONFLOW_ERROR_CODE_HEADER)).toBe('RUN_NOT_FOUND');
      const [info] = err.findDetails(v1.EngineErrorInfoSchema);
      expect(info.code).toBe('RUN_NOT_FOUND');
      expect(info.details).toEqual({ run_id: 'run_missing' });
    });

    it('Health answers ok', async () => {
      expect((await connectClient().health({})).status).toBe('ok');
    });
  });
});
