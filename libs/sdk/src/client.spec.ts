import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient } from './client';
import { IronflowClientError, RunCancelledError, RunFailedError } from './errors';
import { createFunction } from './function';
import { FakeReply, FakeServer, RecordedRequest, startFakeServer } from './testing/fake-server';

const PREFIX = '/ironflow.v1.IronflowService/';

describe('createClient', () => {
  let server: FakeServer;
  let replies: Record<string, (req: RecordedRequest) => FakeReply>;

  beforeAll(async () => {
    server = await startFakeServer((req) => {
      const method = req.path.startsWith(PREFIX) ? req.path.slice(PREFIX.length) : `${req.method} ${req.path}`;
      return replies[method]?.(req) ?? { status: 404, body: { code: 'not_found', message: `no route ${req.path}` } };
    });
  });
  beforeEach(() => {
    replies = {};
    server.requests.length = 0;
  });
  afterAll(() => server.close());

  const client = (extra: Parameters<typeof createClient>[0] = {}) => createClient({ serverUrl: server.url, apiKey: 'k-1', environment: 'prod', ...extra });

  it('emit posts Trigger with camelCase keys and auth/environment headers', async () => {
    replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-1', runIds: ['run-1', 'run-2'], debouncedFunctionIds: ['search'] } });
    const res = await client().emit('order.created', { orderId: 'o-1' }, { idempotencyKey: 'idem-1' });
    expect(res).toEqual({ eventId: 'evt-1', runIds: ['run-1', 'run-2'], debouncedFunctionIds: ['search'], duplicate: false });
    const [req] = server.requests;
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/ironflow.v1.IronflowService/Trigger');
    expect(req.body).toEqual({ event: 'order.created', data: { orderId: 'o-1' }, idempotencyKey: 'idem-1' });
    expect(req.headers['authorization']).toBe('Bearer k-1');
    expect(req.headers['x-ironflow-environment']).toBe('prod');
    expect(req.headers['content-type']).toBe('application/json');
  });

  it('emit answers runIds [], debouncedFunctionIds [] and duplicate false when the server omits them', async () => {
    replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-2' } });
    expect(await client().emit('nobody.listens')).toEqual({ eventId: 'evt-2', runIds: [], debouncedFunctionIds: [], duplicate: false });
    expect(server.requests[0].body).toEqual({ event: 'nobody.listens', data: {} });
  });

  it('emit answers duplicate true when the idempotency key was used before (the first event\'s id and runs)', async () => {
    replies.Trigger = () => ({ status: 200, body: { eventId: 'evt-1', runIds: ['run-1'], duplicate: true } });
    expect(await client().emit('order.created', {}, { idempotencyKey: 'idem-1' })).toEqual({ eventId: 'evt-1', runIds: ['run-1'], debouncedFunctionIds: [], duplicate: true });
  });

  it('emitSync sends timeout_ms (default 30000) and returns the first result', async () => {
    replies.TriggerSync = () => ({
      status: 200,
      body: { eventId: 'evt-3', results: [{ runId: 'run-3', functionId: 'f', status: 'completed', output: { ok: true }, durationMs: 12 }] },
    });
    const res = await client().emitSync('order.created', { a: 1 });
    expect(res).toEqual({ eventId: 'evt-3', runId: 'run-3', functionId: 'f', status: 'completed', output: { ok: true }, durationMs: 12 });
    expect(server.requests[0].body).toEqual({ event: 'order.created', data: { a: 1 }, timeout_ms: 30_000 });
    await client().emitSync('x', {}, { timeoutMs: 500 });
    expect(server.requests[1].body.timeout_ms).toBe(500);
  });

  it('emitSync throws RunFailedError for "failed", RunCancelledError for "cancelled", NO_RESULTS for none', async () => {
    replies.TriggerSync = () => ({ status: 200, body: { eventId: 'e', results: [{ runId: 'r', functionId: 'f', status: 'failed', error: { message: 'boom', code: 'STEP_FAILED' } }] } });
    const failed = await client().emitSync('x').catch((e) => e);
    expect(failed).toBeInstanceOf(RunFailedError);
    expect(failed).toMatchObject({ runId: 'r', functionId: 'f', runError: { message: 'boom', code: 'STEP_FAILED' }, code: 'RUN_FAILED' });

    replies.TriggerSync = () => ({ status: 200, body: { eventId: 'e', results: [{ runId: 'r', functionId: 'f', status: 'cancelled' }] } });
    const cancelled = await client().emitSync('x').catch((e) => e);
    expect(cancelled).toBeInstanceOf(RunCancelledError);

    replies.TriggerSync = () => ({ status: 200, body: { eventId: 'e', results: [] } });
    const empty = await client().emitSync('x').catch((e) => e);
    expect(empty).toBeInstanceOf(IronflowClientError);
    expect(empty.code).toBe('NO_RESULTS');

    // Only the exact lowercase strings count as failures (WIRE-PROTOCOL.md 5.2).
    replies.TriggerSync = () => ({ status: 200, body: { eventId: 'e', results: [{ runId: 'r', functionId: 'f', status: 'RUN_STATUS_FAILED' }] } });
    expect((await client().emitSync('x')).status).toBe('RUN_STATUS_FAILED');
  });

  it('throws IronflowClientError with code and message from a non-2xx JSON body', async () => {
    replies.GetRun = () => ({ status: 404, body: { code: 'not_found', message: 'run run-x not found' } });
    const err = await client().getRun('run-x').catch((e) => e);
    expect(err).toBeInstanceOf(IronflowClientError);
    expect(err).toMatchObject({ code: 'not_found', status: 404, retryable: false });
    expect(err.message).toContain('run run-x not found');
    expect(err.engineCode).toBeUndefined();
    expect(server.requests[0].body).toEqual({ id: 'run-x' });
  });

  it("keeps the engine's own code (ironflowCode) next to the Connect code", async () => {
    replies.GetRun = () => ({ status: 404, body: { code: 'not_found', message: 'run run-x not found', ironflowCode: 'RUN_NOT_FOUND' } });
    const err = await client().getRun('run-x').catch((e) => e);
    expect(err).toBeInstanceOf(IronflowClientError);
    expect(err).toMatchObject({ code: 'not_found', engineCode: 'RUN_NOT_FOUND', status: 404, message: 'GetRun: run run-x not found' });
  });

  it('exposes the resolved server URL without a trailing slash', () => {
    expect(createClient({ serverUrl: `${server.url}//` }).serverUrl).toBe(server.url);
  });

  it('falls back to HTTP_<status> and the body text when the error body is not JSON', async () => {
    replies.Health = () => ({ status: 503, body: undefined });
    const err = await client().health().catch((e) => e);
    expect(err).toMatchObject({ code: 'HTTP_503', status: 503, retryable: true });
  });

  it('a 429 is retryable, except a body too large (resource_exhausted / PAYLOAD_TOO_LARGE), which would be refused again', async () => {
    replies.Health = () => ({ status: 429, body: { code: 'resource_exhausted', message: 'slow down' } });
    expect(await client().health().catch((e) => e)).toMatchObject({ code: 'resource_exhausted', status: 429, retryable: true });
    replies.Health = () => ({ status: 429, body: { code: 'resource_exhausted', message: 'request body is over the 4194304 byte limit', ironflowCode: 'PAYLOAD_TOO_LARGE' } });
    expect(await client().health().catch((e) => e)).toMatchObject({ code: 'resource_exhausted', engineCode: 'PAYLOAD_TOO_LARGE', status: 429, retryable: false });
  });

  it('reports a connection failure as NETWORK_ERROR', async () => {
    const err = await createClient({ serverUrl: 'http://127.0.0.1:1' })
      .health()
      .catch((e) => e);
    expect(err).toBeInstanceOf(IronflowClientError);
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', status: 0, retryable: true });
  });

  it('getRun, listRuns, getRunSteps, cancelRun and health post their bodies and map answers', async () => {
    const run = { id: 'run-1', functionId: 'f', eventId: 'e', status: 'running', attempt: 1, maxAttempts: 3, createdAt: 't', updatedAt: 't' };
    replies.GetRun = () => ({ status: 200, body: run });
    replies.ListRuns = () => ({ status: 200, body: { runs: [run], nextCursor: 'c2', totalCount: 7 } });
    replies.GetRunSteps = () => ({ status: 200, body: { steps: [{ id: 's' }] } });
    replies.CancelRun = () => ({ status: 200, body: { ...run, status: 'cancelled' } });
    replies.Health = () => ({ status: 200, body: { status: 'ok' } });

    const c = client();
    expect(await c.getRun('run-1')).toEqual(run);
    expect(await c.listRuns({ functionId: 'f', status: 'running', limit: 10 })).toEqual({ runs: [run], nextCursor: 'c2', totalCount: 7 });
    expect(await c.getRunSteps('run-1')).toEqual({ steps: [{ id: 's' }], history: [], children: [] });
    expect((await c.cancelRun('run-1')).status).toBe('cancelled');
    expect(await c.health()).toEqual({ status: 'ok' });

    expect(server.requests.map((r) => [r.path.slice(PREFIX.length), r.body])).toEqual([
      ['GetRun', { id: 'run-1' }],
      ['ListRuns', { functionId: 'f', status: 'running', limit: 10 }],
      ['GetRunSteps', { id: 'run-1', runId: 'run-1' }],
      ['CancelRun', { id: 'run-1', reason: '' }],
      ['Health', {}],
    ]);
  });

  it('a run read over Connect has the contracts\' executionMode (push / pull), not the enum name the JSON layer renders', async () => {
    const wire = { id: 'run-1', functionId: 'f', functionVersion: 2, eventId: 'e', executionMode: 'EXECUTION_MODE_PULL', status: 'completed', attempt: 1, maxAttempts: 3, createdAt: 't', updatedAt: 't' };
    replies.GetRun = () => ({ status: 200, body: wire });
    replies.ListRuns = () => ({ status: 200, body: { runs: [{ ...wire, executionMode: 'EXECUTION_MODE_PUSH' }] } });
    replies.GetRunSteps = () => ({ status: 200, body: { steps: [], children: [{ ...wire, id: 'child-1' }] } });
    replies.CancelRun = () => ({ status: 200, body: { ...wire, executionMode: 'EXECUTION_MODE_PUSH' } });
    const c = client();
    expect(await c.getRun('run-1')).toEqual({ ...wire, executionMode: 'pull' });
    expect((await c.waitForRun('run-1', { timeoutMs: 1000 })).status).toBe('completed');
    expect((await c.listRuns()).runs.map((r) => r.executionMode)).toEqual(['push']);
    expect((await c.getRunSteps('run-1')).children.map((r) => [r.id, r.executionMode])).toEqual([['child-1', 'pull']]);
    expect((await c.cancelRun('run-1')).executionMode).toBe('push');
  });

  it('registerFunction sends the set fields, the raw mode as preferredMode and the endpoint', async () => {
    replies.RegisterFunction = () => ({ status: 200, body: { created: true, function: { id: 'greet', version: 1 } } });
    const fn = createFunction(
      { id: 'greet', mode: 'push', timeoutMs: 60_000, concurrency: { limit: 2, key: 'data.userId' }, cancelOn: [{ event: 'user.deleted', match: 'data.userId' }], secrets: ['API_TOKEN'] },
      async () => 'hi',
    );
    const res = await client().registerFunction(fn, { endpointUrl: 'https://app.example/api/ironflow' });
    expect(res).toEqual({ created: true, function: { id: 'greet', version: 1 } });
    expect(server.requests[0].path).toBe('/ironflow.v1.IronflowService/RegisterFunction');
    expect(server.requests[0].body).toEqual({
      id: 'greet',
      timeoutMs: 60_000,
      concurrency: { limit: 2, key: 'data.userId' },
      cancelOn: [{ event: 'user.deleted', match: 'data.userId' }],
      secrets: ['API_TOKEN'],
      preferredMode: 'push',
      endpointUrl: 'https://app.example/api/ironflow',
    });

    await client().registerFunction({ id: 'plain', name: 'Plain', triggers: [{ event: 'a' }], mode: 'pull', secrets: [] });
    expect(server.requests[1].body).toEqual({ id: 'plain', name: 'Plain', triggers: [{ event: 'a' }], preferredMode: 'pull' });
  });

  it('secrets and API keys go over REST with the key and environment; values and keys are never asked back', async () => {
    replies['PUT /api/v1/secrets/API%20TOKEN'] = () => ({ status: 200, body: { secret: { name: 'API TOKEN', createdAt: 't0', updatedAt: 't1' } } });
    replies['GET /api/v1/secrets'] = () => ({ status: 200, body: { secrets: [{ name: 'A', createdAt: 't0', updatedAt: 't0' }] } });
    replies['DELETE /api/v1/secrets/A'] = () => ({ status: 404, body: { code: 'SECRET_NOT_FOUND', message: 'secret A does not exist' } });
    replies['POST /api/v1/api-keys'] = () => ({ status: 201, body: { key: 'ifk_x_y', apiKey: { id: 'x', prefix: 'ifk_x' } } });
    replies['GET /api/v1/api-keys'] = () => ({ status: 200, body: { apiKeys: [{ id: 'x', prefix: 'ifk_x' }] } });
    replies['DELETE /api/v1/api-keys/x'] = () => ({ status: 200, body: { apiKey: { id: 'x', revokedAt: 't2' } } });
    const c = client();
    expect(await c.setSecret('API TOKEN', 's3cret')).toEqual({ name: 'API TOKEN', createdAt: 't0', updatedAt: 't1' });
    expect(await c.listSecrets()).toEqual([{ name: 'A', createdAt: 't0', updatedAt: 't0' }]);
    await expect(c.deleteSecret('A')).rejects.toMatchObject({ code: 'SECRET_NOT_FOUND', status: 404 });
    expect(await c.createApiKey({ project: 'p' })).toEqual({ key: 'ifk_x_y', apiKey: { id: 'x', prefix: 'ifk_x' } });
    expect(await c.listApiKeys()).toEqual([{ id: 'x', prefix: 'ifk_x' }]);
    expect(await c.revokeApiKey('x')).toEqual({ id: 'x', revokedAt: 't2' });
    expect(server.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'PUT /api/v1/secrets/API%20TOKEN',
      'GET /api/v1/secrets',
      'DELETE /api/v1/secrets/A',
      'POST /api/v1/api-keys',
      'GET /api/v1/api-keys',
      'DELETE /api/v1/api-keys/x',
    ]);
    expect(server.requests[0].body).toEqual({ value: 's3cret' });
    expect(server.requests[3].body).toEqual({ project: 'p' });
    for (const r of server.requests) {
      expect(r.headers['authorization']).toBe('Bearer k-1');
      expect(r.headers['x-ironflow-environment']).toBe('prod');
    }
  });

  it('registerFunction sends debounce as the Ironflow SDK does: snake_case, max_wait_ms only when set', async () => {
    replies.RegisterFunction = () => ({ status: 200, body: { created: true, function: { id: 'search', version: 1 } } });
    await client().registerFunction({ id: 'search', triggers: [{ event: 'typed', expression: 'size(event.data.q) > 2' }], debounce: { periodMs: 1000, key: 'userId', maxWaitMs: 5000 } });
    await client().registerFunction({ id: 'search2', debounce: { periodMs: 2000 } });
    expect(server.requests.map((r) => r.body)).toEqual([
      { id: 'search', triggers: [{ event: 'typed', expression: 'size(event.data.q) > 2' }], debounce: { period_ms: 1000, key: 'userId', max_wait_ms: 5000 } },
      { id: 'search2', debounce: { period_ms: 2000, key: '' } },
    ]);
  });

  it('sends no environment header when none is configured', async () => {
    const saved = process.env.IRONFLOW_ENV;
    delete process.env.IRONFLOW_ENV;
    try {
      replies.Health = () => ({ status: 200, body: { status: 'ok' } });
      await createClient({ serverUrl: server.url }).health();
      expect(server.requests[0].headers['x-ironflow-environment']).toBeUndefined();
      expect(server.requests[0].headers['authorization']).toBe(process.env.IRONFLOW_API_KEY ? `Bearer ${process.env.IRONFLOW_API_KEY}` : undefined);
    } finally {
      if (saved !== undefined) process.env.IRONFLOW_ENV = saved;
    }
  });

  describe('waitForRun', () => {
    const view = (status: string, over: Record<string, unknown> = {}) => ({ id: 'r-1', functionId: 'ship', status, createdAt: '2026-01-01T00:00:00.000Z', startedAt: '2026-01-01T00:00:00.100Z', ...over });

    it('reads the run until it ends and answers like invoke', async () => {
      let reads = 0;
      replies.GetRun = () => ({ status: 200, body: ++reads < 3 ? view('running') : view('completed', { output: { ok: true }, endedAt: '2026-01-01T00:00:00.300Z' }) });
      expect(await client().waitForRun('r-1', { pollMs: 10 })).toEqual({ runId: 'r-1', functionId: 'ship', status: 'completed', output: { ok: true }, durationMs: 200 });
      expect(reads).toBe(3);
      expect(server.requests.map((r) => r.body)).toEqual([{ id: 'r-1' }, { id: 'r-1' }, { id: 'r-1' }]);
    });

    it('throws RunFailedError for a failed run, and answers the status as it stands at the deadline', async () => {
      replies.GetRun = () => ({ status: 200, body: view('failed', { error: { message: 'no', code: 'X' } }) });
      await expect(client().waitForRun('r-1')).rejects.toBeInstanceOf(RunFailedError);
      replies.GetRun = () => ({ status: 200, body: view('waiting') });
      expect(await client().waitForRun('r-1', { timeoutMs: 50, pollMs: 10 })).toMatchObject({ runId: 'r-1', status: 'waiting' });
    });

    it('throws UNREACHABLE naming the server and the cause when the server cannot be reached until the deadline', async () => {
      // A port nothing listens on: bound, then closed.
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((resolve) => closed.close(resolve));
      const err = await createClient({ serverUrl: `http://127.0.0.1:${port}` }).waitForRun('r-1', { timeoutMs: 300, pollMs: 50 }).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'IronflowClientError', code: 'UNREACHABLE', status: 0, retryable: true });
      expect((err as Error).message).toMatch(new RegExp(`^server http://127\\.0\\.0\\.1:${port} could not be reached while waiting for run r-1: connect ECONNREFUSED`));
    });

    it('reads again after unavailable (a draining replica) but not after another error', async () => {
      let reads = 0;
      replies.GetRun = () => (++reads === 1 ? { status: 503, body: { code: 'unavailable', message: 'draining' } } : { status: 200, body: view('cancelled') });
      await expect(client().waitForRun('r-1', { pollMs: 10 })).rejects.toBeInstanceOf(RunCancelledError);
      replies.GetRun = () => ({ status: 404, body: { code: 'not_found', message: 'run r-2 does not exist', ironflowCode: 'RUN_NOT_FOUND' } });
      await expect(client().waitForRun('r-2', { pollMs: 10 })).rejects.toMatchObject({ code: 'not_found', engineCode: 'RUN_NOT_FOUND' });
    });
  });

  it('listEvents GETs /api/v1/events with the filters and the auth headers; listFunctions GETs /api/v1/functions', async () => {
    replies['GET /api/v1/events'] = () => ({ status: 200, body: { events: [{ id: 'e-1', name: 'a', data: {}, ts: 't' }], nextCursor: 'c' } });
    expect(await client().listEvents({ name: 'a', limit: 5 })).toEqual({ events: [{ id: 'e-1', name: 'a', data: {}, ts: 't' }], nextCursor: 'c' });
    expect(server.requests[0].query.toString()).toBe('name=a&limit=5');
    expect(server.requests[0].headers['authorization']).toBe('Bearer k-1');
    expect(server.requests[0].headers['x-ironflow-environment']).toBe('prod');

    replies['GET /api/v1/functions'] = () => ({ status: 200, body: { functions: [{ id: 'f', version: 3 }] } });
    expect(await client().listFunctions()).toEqual([{ id: 'f', version: 3 }]);

    replies['GET /api/v1/events'] = () => ({ status: 400, body: { code: 'VALIDATION_ERROR', message: 'cursor: not a cursor this API returned' } });
    await expect(client().listEvents({ cursor: 'x' })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: 'GET /api/v1/events: cursor: not a cursor this API returned' });

    // resumeRun is a REST call like these: its errors name the route, as the others do.
    replies['POST /api/v1/runs/resume'] = () => ({ status: 409, body: { code: 'RUN_NOT_RUNNING', message: 'run r-1 is completed' } });
    await expect(client().resumeRun('r-1')).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING', message: 'POST /api/v1/runs/resume: run r-1 is completed' });
    expect(server.requests.at(-1)?.body).toEqual({ run_id: 'r-1', from_step: '' });
  });
});
