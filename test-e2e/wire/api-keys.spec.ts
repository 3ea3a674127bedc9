/**
 * Golden wire tests of API keys and secrets (issue 9, items 4 and 7), with raw HTTP/1.1, raw
 * HTTP/2 and raw Connect/gRPC frames (nothing from `libs/sdk`), on both stores:
 *
 * - once a key exists, every client and worker route refuses a call without a key or with a bad
 *   one: 401 with a code on REST (`UNAUTHENTICATED`) and Connect JSON (`unauthenticated`),
 *   Connect binary (401), gRPC (`grpc-status` 16) and the `WorkerService.Connect` stream (Connect
 *   end-of-stream error `unauthenticated`); `/health`, `/ready`, `/metrics` stay open;
 * - a key gives its call its project and env (WIRE-PROTOCOL.md 0: `Authorization: Bearer`);
 * - secrets reach a pull assignment as `context.secrets` and a push request as `secrets`, and
 *   never come back out of the API.
 */
import { randomBytes } from 'node:crypto';
import { WebSocket } from 'ws';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { EngineMessageSchema, IronflowService, WorkerMessageSchema, WorkerService } from '@ironflow/contracts/proto';
import { envelope, envelopes, h2Request } from '../support/h2-raw';
import { connect, PushEndpoint, rest, startPushEndpoint, startWireEngine, uid, waitFor, WIRE_STORES, WireEngine } from '../support/wire-harness';

const ADMIN_KEY = `admin-${randomBytes(24).toString('hex')}`;
const OPEN_ROUTES = ['/health', '/ready', '/metrics'];
/** The runs UI's page and assets carry no data and answer without a key (its API calls send one): the status each answers. */
const UI_ROUTES: Record<string, number> = { '/': 200, '/ui/config.json': 200, '/ui/x-1': 404 };
const BAD_KEYS: Record<string, Record<string, string>> = {
  'no key': {},
  'a malformed key': { authorization: 'Bearer not-a-key' },
  'another scheme': { authorization: 'Basic dXNlcjpwYXNz' },
  'an unknown key': { authorization: `Bearer ifk_0123456789abcdef_${randomBytes(32).toString('base64url')}` },
};
const CLIENT_METHODS = IronflowService.methods.map((m) => m.name);

/** A WorkerMessage `register`, as the v0.29 stream worker sends it first. */
function registerFrame(workerId: string): Buffer {
  const message = create(WorkerMessageSchema, {
    payload: { case: 'register', value: { workerId, hostname: 'h', functionIds: [], maxConcurrentJobs: 1, labels: {}, version: { sdk: '0.29.0', runtime: 'node' } } },
  });
  return envelope(toBinary(WorkerMessageSchema, message));
}

describe.each(WIRE_STORES)('wire: API keys and secrets (%s)', (store) => {
  let engine: WireEngine;
  let endpoint: PushEndpoint;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    endpoint = await startPushEndpoint();
    engine = await startWireEngine(store, { adminKey: ADMIN_KEY, secretsKey: randomBytes(32), apiKeyCacheMs: 0 });
    // While no key exists the server is open; the admin key makes the first one, shown once.
    expect((await connect(engine.url, 'ListFunctions', {})).status).toBe(200);
    const created = await rest(engine.url, 'POST', '/api/v1/api-keys', { project: 'shop', env: 'prod', name: 'wire' }, 'default', { authorization: `Bearer ${ADMIN_KEY}` });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ key: expect.stringMatching(/^ifk_/), apiKey: { project: 'shop', env: 'prod', name: 'wire' } });
    key = created.json.key;
    keyId = created.json.apiKey.id;
  });

  afterAll(async () => {
    await engine?.close();
    await endpoint?.close();
  });

  const withKey = (k = key) => ({ authorization: `Bearer ${k}` });

  it('lists the routes it checks (harness check): client, worker, secrets and key-management routes', () => {
    const paths = engine.routes.map((r) => `${r.method} ${r.path}`);
    for (const p of ['POST /ironflow.v1.IronflowService/:method', 'GET /api/v1/runs/:id', 'POST /api/v1/events', 'GET /api/v1/workers/:workerId/jobs', 'PUT /api/v1/workers/:workerId/jobs/:jobId', 'PUT /api/v1/secrets/:name', 'POST /api/v1/api-keys', 'GET /health']) {
      expect(paths).toContain(p);
    }
  });

  it.each(Object.keys(BAD_KEYS))('with %s, every HTTP/1 route answers 401 with a code (REST: UNAUTHENTICATED; Connect JSON: unauthenticated), except /health, /ready, /metrics and the runs UI page and its assets', async (which) => {
    const headers = BAD_KEYS[which];
    let checked = 0;
    for (const route of engine.routes) {
      const paths = route.path.includes(':method') ? CLIENT_METHODS.map((m) => route.path.replace(':method', m)) : [route.path.replace(/:[A-Za-z]+/g, 'x-1')];
      for (const path of paths) {
        const res = await fetch(`${engine.url}${path}`, {
          method: route.method,
          headers: { 'content-type': 'application/json', ...headers },
          ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { body: '{}' }),
        });
        const body = await res.text();
        if (OPEN_ROUTES.includes(path)) {
          expect([path, res.status]).toEqual([path, 200]);
          continue;
        }
        if (path in UI_ROUTES) {
          expect([path, res.status]).toEqual([path, UI_ROUTES[path]]);
          continue;
        }
        expect([route.method, path, res.status]).toEqual([route.method, path, 401]);
        const json = JSON.parse(body);
        if (path.startsWith('/ironflow.v1.')) expect(json).toMatchObject({ code: 'unauthenticated', ironflowCode: 'UNAUTHENTICATED' });
        else expect(json).toMatchObject({ code: 'UNAUTHENTICATED', message: expect.any(String) });
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(CLIENT_METHODS.length + 12);
  });

  it.each(Object.keys(BAD_KEYS))('with %s, every IronflowService method over HTTP/2 answers unauthenticated: Connect binary 401, gRPC status 16', async (which) => {
    for (const method of CLIENT_METHODS) {
      const path = `/${IronflowService.typeName}/${method}`;
      const binary = await h2Request(engine.port, path, { 'content-type': 'application/proto', 'connect-protocol-version': '1', ...BAD_KEYS[which] }, Buffer.alloc(0));
      expect([method, binary.status]).toEqual([method, 401]);
      expect(JSON.parse(binary.body.toString('utf8'))).toMatchObject({ code: 'unauthenticated' });

      const grpc = await h2Request(engine.port, path, { 'content-type': 'application/grpc', te: 'trailers', ...BAD_KEYS[which] }, envelope(new Uint8Array(0)));
      expect(grpc.status).toBe(200);
      expect([method, grpc.trailers['grpc-status'] ?? grpc.headers['grpc-status']]).toEqual([method, '16']);
    }
  });

  it.each(Object.keys(BAD_KEYS))('with %s, the WorkerService.Connect stream ends with Connect code unauthenticated (and gRPC 16), registering nothing', async (which) => {
    const workerId = uid('worker-stream');
    const path = `/${WorkerService.typeName}/Connect`;
    const answer = await h2Request(engine.port, path, { 'content-type': 'application/connect+proto', 'connect-protocol-version': '1', ...BAD_KEYS[which] }, registerFrame(workerId));
    expect(answer.status).toBe(200);
    const frames = envelopes(answer.body);
    expect(frames.map((f) => f.flags)).toEqual([2]);
    expect(JSON.parse(frames[0].data.toString('utf8'))).toMatchObject({ error: { code: 'unauthenticated' } });

    const grpc = await h2Request(engine.port, path, { 'content-type': 'application/grpc', te: 'trailers', ...BAD_KEYS[which] }, registerFrame(workerId));
    expect(grpc.trailers['grpc-status'] ?? grpc.headers['grpc-status']).toBe('16');

    const workers = await rest(engine.url, 'GET', '/api/v1/workers', undefined, 'prod', withKey());
    expect(workers.status).toBe(200);
    expect(JSON.stringify(workers.json)).not.toContain(workerId);
  });

  it('with the key, REST, Connect JSON, Connect binary and the worker stream answer, in the key\'s project and env', async () => {
    const fnId = uid('keyed');
    const reg = await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'pull', triggers: [{ event: 'k.e' }] }, withKey());
    expect(reg.status).toBe(200);
    const listed = await rest(engine.url, 'GET', '/api/v1/functions', undefined, 'prod', withKey());
    expect(listed.status).toBe(200);
    expect(listed.json.functions.map((f: { id: string }) => f.id)).toContain(fnId);

    // Another project's key sees none of it; an open call is no longer possible.
    const other = await rest(engine.url, 'POST', '/api/v1/api-keys', { project: 'blog' }, 'default', { authorization: `Bearer ${ADMIN_KEY}` });
    const blog = await connect(engine.url, 'ListFunctions', {}, withKey(other.json.key));
    expect(blog.status).toBe(200);
    expect(JSON.stringify(blog.json)).not.toContain(fnId);

    const binary = await h2Request(engine.port, `/${IronflowService.typeName}/Health`, { 'content-type': 'application/proto', 'connect-protocol-version': '1', ...withKey() }, Buffer.alloc(0));
    expect(binary.status).toBe(200);

    const workerId = uid('worker-stream');
    const stream = await h2Request(engine.port, `/${WorkerService.typeName}/Connect`, { 'content-type': 'application/connect+proto', 'connect-protocol-version': '1', ...withKey() }, registerFrame(workerId));
    const frames = envelopes(stream.body);
    expect(frames[0].flags).toBe(0);
    expect(fromBinary(EngineMessageSchema, frames[0].data).payload).toMatchObject({ case: 'registered', value: { workerId } });
    const workers = await rest(engine.url, 'GET', '/api/v1/workers', undefined, 'prod', withKey());
    expect(workers.json.workers).toEqual(expect.arrayContaining([expect.objectContaining({ id: workerId })]));
  });

  it('a key used for another env (X-Ironflow-Environment) is 403 with a code on every protocol', async () => {
    const restAnswer = await rest(engine.url, 'GET', '/api/v1/runs', undefined, 'staging', withKey());
    expect(restAnswer.status).toBe(403);
    expect(restAnswer.json).toMatchObject({ code: 'PERMISSION_DENIED' });
    const json = await connect(engine.url, 'ListRuns', {}, { ...withKey(), 'x-ironflow-environment': 'staging' });
    expect(json.status).toBe(403);
    expect(json.json).toMatchObject({ code: 'permission_denied', ironflowCode: 'PERMISSION_DENIED' });
    const stream = await h2Request(engine.port, `/${WorkerService.typeName}/Connect`, { 'content-type': 'application/connect+proto', 'connect-protocol-version': '1', 'x-ironflow-environment': 'staging', ...withKey() }, registerFrame(uid('w')));
    expect(JSON.parse(envelopes(stream.body)[0].data.toString('utf8'))).toMatchObject({ error: { code: 'permission_denied' } });
  });

  it('key management: only the admin key lists and revokes; a revoked key is 401 at once; the list never shows a key', async () => {
    expect((await rest(engine.url, 'GET', '/api/v1/api-keys', undefined, 'prod', withKey())).status).toBe(401);
    const made = await rest(engine.url, 'POST', '/api/v1/api-keys', { project: 'shop', env: 'prod', name: 'short-lived' }, 'default', { authorization: `Bearer ${ADMIN_KEY}` });
    const list = await rest(engine.url, 'GET', '/api/v1/api-keys', undefined, 'default', { authorization: `Bearer ${ADMIN_KEY}` });
    expect(list.status).toBe(200);
    expect(list.json.apiKeys).toEqual(expect.arrayContaining([expect.objectContaining({ id: keyId, prefix: `ifk_${keyId}`, project: 'shop', env: 'prod' })]));
    expect(list.text).not.toContain(key.slice(21));
    expect(list.text).not.toContain(made.json.key.slice(21));

    expect((await connect(engine.url, 'Health', {}, withKey(made.json.key))).status).toBe(200);
    const revoked = await rest(engine.url, 'DELETE', `/api/v1/api-keys/${made.json.apiKey.id}`, undefined, 'default', { authorization: `Bearer ${ADMIN_KEY}` });
    expect(revoked.status).toBe(200);
    expect(revoked.json.apiKey.revokedAt).toEqual(expect.any(String));
    const refused = await connect(engine.url, 'Health', {}, withKey(made.json.key));
    expect(refused.status).toBe(401);
    expect(refused.json.message).toContain('revoked');
  });

  it('secrets: set and listed by name only; a REST pull assignment carries context.secrets and a push request carries secrets', async () => {
    const value = `v-${randomBytes(8).toString('hex')}`;
    const put = await rest(engine.url, 'PUT', '/api/v1/secrets/PAYMENT_TOKEN', { value }, 'prod', withKey());
    expect(put.status).toBe(200);
    expect(put.json).toEqual({ secret: { name: 'PAYMENT_TOKEN', createdAt: expect.any(String), updatedAt: expect.any(String) } });
    const list = await rest(engine.url, 'GET', '/api/v1/secrets', undefined, 'prod', withKey());
    expect(list.json.secrets.map((s: { name: string }) => s.name)).toContain('PAYMENT_TOKEN');
    expect(list.text).not.toContain(value);

    // Pull over REST (3.4): context.secrets, exactly the declared ones.
    const pullFn = uid('pull-secret');
    const event = uid('secret.event');
    expect((await connect(engine.url, 'RegisterFunction', { id: pullFn, preferredMode: 'pull', triggers: [{ event }], secrets: ['PAYMENT_TOKEN'] }, withKey())).status).toBe(200);
    const workerId = `worker-${Date.now().toString(36)}-abcdef`;
    expect((await rest(engine.url, 'POST', `/api/v1/workers/${workerId}/register`, { worker_id: workerId, function_ids: [pullFn], max_concurrent_jobs: 1, labels: {} }, 'prod', withKey())).status).toBe(200);
    expect((await connect(engine.url, 'Trigger', { event, data: {} }, withKey())).status).toBe(200);
    const poll = await waitFor('a job', async () => {
      const r = await rest(engine.url, 'GET', `/api/v1/workers/${workerId}/jobs?available=1`, undefined, 'prod', withKey());
      return r.status === 200 ? r : undefined;
    });
    expect(poll.json.jobs[0].context).toEqual({ secrets: { PAYMENT_TOKEN: value } });

    // Push (2.2): `secrets`.
    const pushFn = uid('push-secret');
    const pushEvent = uid('push.secret');
    endpoint.script(pushFn, () => ({ body: { status: 'completed', result: { ok: true }, steps: [] } }));
    expect((await connect(engine.url, 'RegisterFunction', { id: pushFn, preferredMode: 'push', endpointUrl: `${endpoint.base}/fn`, triggers: [{ event: pushEvent }], secrets: ['PAYMENT_TOKEN'] }, withKey())).status).toBe(200);
    expect((await connect(engine.url, 'Trigger', { event: pushEvent, data: {} }, withKey())).status).toBe(200);
    const pushed = await waitFor('the push request', async () => endpoint.requestsFor(pushFn)[0]);
    expect(pushed.body.secrets).toEqual({ PAYMENT_TOKEN: value });

    // Registering a push endpoint at a metadata address is refused by name.
    const metadata = await connect(engine.url, 'RegisterFunction', { id: uid('imds'), preferredMode: 'push', endpointUrl: 'http://169.254.169.254/latest' }, withKey());
    expect(metadata.status).toBe(400);
    expect(metadata.json.message).toContain('link-local');
  });
  it('the subscription WebSocket (<base>/ws) is refused 401 without a key or with a bad one, and opens with the key as Bearer or as the SDK\'s token query parameter', async () => {
    const wsBase = engine.url.replace(/^http/, 'ws');
    const upgrade = (url: string, headers: Record<string, string> = {}) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(url, { headers });
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => {
          ws.close();
          resolve(101);
        });
        ws.once('error', (err) => reject(err));
      });
    for (const headers of Object.values(BAD_KEYS)) expect(await upgrade(`${wsBase}/ws?env=prod`, headers)).toBe(401);
    expect(await upgrade(`${wsBase}/ws?env=prod&token=not-a-key`)).toBe(401);
    expect(await upgrade(`${wsBase}/ws?env=prod`, withKey())).toBe(101);
    expect(await upgrade(`${wsBase}/ws?env=prod&token=${encodeURIComponent(key)}`)).toBe(101);
    // The key's env is the subscription's: another env is refused.
    expect(await upgrade(`${wsBase}/ws?env=staging&token=${encodeURIComponent(key)}`)).toBe(403);
  });
});
