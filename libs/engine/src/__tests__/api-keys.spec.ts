/**
 * API keys (issue 9, item 7) on both stores: kept as SHA-256 only; required once a key exists
 * (shared by every process through the store) or when IRONFLOW_REQUIRE_API_KEY is set; a key
 * gives its call its project and env; revocation; the admin key; worker isolation by project.
 */
import { createHash } from 'node:crypto';
import { CallScope } from '@ironflow/contracts';
import { Engine } from '@ironflow/engine';
import { STORES, TestEngine, openTestEngine } from '@ironflow/testing';

const ADMIN_KEY = 'admin-key-for-tests-0123456789abcdef';
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe.each(STORES)('API keys [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, {}, { security: { auth: { adminKey: ADMIN_KEY, cacheMs: 60_000 } } });
  });
  afterEach(async () => {
    await t.close();
  });

  async function rawKeyRows(): Promise<Record<string, unknown>[]> {
    return t.db.store.read('test.keys', (tx) => tx.query(`SELECT * FROM api_keys ORDER BY created_at, id`));
  }

  it('a key is shown once and kept only as its SHA-256; listings show its id and prefix, never the key or its hash', async () => {
    const { key, apiKey } = await t.engine.apiKeys.create({ project: 'shop', env: 'prod', name: 'checkout service' });
    expect(key).toMatch(/^ifk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    expect(apiKey).toEqual({ id: key.slice(4, 20), prefix: key.slice(0, 20), project: 'shop', env: 'prod', name: 'checkout service', createdAt: expect.any(String) });

    const rows = await rawKeyRows();
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash).toBe(createHash('sha256').update(key).digest('hex'));
    expect(JSON.stringify(rows)).not.toContain(key.slice(21));

    const listed = await t.engine.apiKeys.list();
    expect(listed).toEqual([apiKey]);
    expect(JSON.stringify(listed)).not.toContain(key.slice(21));
    expect(JSON.stringify(listed)).not.toContain(String(rows[0].key_hash));

    await expect(t.engine.apiKeys.create({ project: 'has space' })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    await expect(t.engine.apiKeys.create({ env: 'a.b' })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });

  it('an open server (no key, no IRONFLOW_REQUIRE_API_KEY) takes a call without a key as project default with the header env, and refuses a key it does not have (401, never ignored); the admin key, when set, guards key creation', async () => {
    expect(await t.engine.apiKeys.mode()).toEqual({ required: false, reason: 'open' });
    expect(await t.engine.apiKeys.authenticate({})).toEqual({ project: 'default', env: 'default' });
    expect(await t.engine.apiKeys.authenticate({ environment: 'staging' })).toEqual({ project: 'default', env: 'staging' });
    for (const presented of ['whatever', `ifk_0123456789abcdef_${'A'.repeat(43)}`]) {
      await expect(t.engine.apiKeys.authenticate({ ...bearer(presented), environment: 'staging' })).rejects.toMatchObject({ code: 'UNAUTHENTICATED', httpStatus: 401 });
    }
    expect(await t.engine.apiKeys.mode()).toEqual({ required: false, reason: 'open' });
    await expect(t.engine.apiKeys.authenticate({ environment: 'bad.env' })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    // Without an admin key, anyone may make the first key while the server is open; with one, only it.
    const noAdmin = await t.restart({ security: { auth: {} } });
    await expect(noAdmin.apiKeys.authenticateAdmin(undefined)).resolves.toBeUndefined();
    await expect(t.engine.apiKeys.authenticateAdmin(undefined)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(t.engine.apiKeys.authenticateAdmin(`Bearer ${ADMIN_KEY}`)).resolves.toBeUndefined();
    // A worker that registered into `labels.env` keeps polling and heartbeating with the default header.
    const open = await t.engine.apiKeys.authenticate({});
    await t.engine.pull.register(open, 'w-env-label', { worker_id: 'w-env-label', function_ids: [], labels: { env: 'staging' } });
    await expect(t.engine.pull.poll('w-env-label', 1, open)).resolves.toEqual([]);
    await expect(t.engine.pull.heartbeat('w-env-label', { worker_id: 'w-env-label', jobs: [] }, open)).resolves.toEqual({ jobs: [] });
  });

  it('an Authorization header that is not "Bearer <key>" is UNAUTHENTICATED saying so, on an open server too (never ignored, never echoed); a blank one is no header', async () => {
    expect(await t.engine.apiKeys.mode()).toEqual({ required: false, reason: 'open' });
    for (const [authorization, got] of [
      ['Basic dXNlcjpwYXNz', 'the Basic scheme'],
      ['secret-password', 'a value without a scheme'],
      ['Bearer', 'a value without a scheme'],
      ['Bearer two words', 'Bearer with more than one word'],
    ] as const) {
      const refused = t.engine.apiKeys.authenticate({ authorization });
      await expect(refused).rejects.toMatchObject({ code: 'UNAUTHENTICATED', httpStatus: 401, message: `Authorization: "Bearer <key>" is expected, not ${got}` });
      await expect(t.engine.apiKeys.authenticateAdmin(authorization)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    }
    expect(await t.engine.apiKeys.authenticate({ authorization: '  ' })).toEqual({ project: 'default', env: 'default' });
  });

  it('once a key exists every call needs one: missing, malformed, unknown or altered keys are UNAUTHENTICATED; a good key gives its project and env', async () => {
    const { key, apiKey } = await t.engine.apiKeys.create({ project: 'shop', env: 'prod' });
    expect(await t.engine.apiKeys.mode()).toEqual({ required: true, reason: 'keys' });
    const altered = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
    const unknown = `ifk_0123456789abcdef_${key.slice(21)}`;
    for (const headers of [{}, { authorization: '' }, { authorization: key }, { authorization: `Basic ${key}` }, bearer('nope'), bearer(altered), bearer(unknown)]) {
      await expect(t.engine.apiKeys.authenticate(headers)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', httpStatus: 401 });
    }
    const expected: CallScope = { project: 'shop', env: 'prod', apiKeyId: apiKey.id };
    expect(await t.engine.apiKeys.authenticate(bearer(key))).toEqual(expected);
    expect(await t.engine.apiKeys.authenticate({ authorization: `bearer   ${key} `, environment: 'prod' })).toEqual(expected);
    // Another process over the same store sees the key too (the configuration is in the store).
    const other = await t.restart();
    expect(await other.apiKeys.authenticate(bearer(key))).toEqual(expected);
    await expect(other.apiKeys.authenticate({})).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
  });

  it('a process that still holds the server open in its cache takes a key made elsewhere as that key (its project and env), never as project default', async () => {
    const cachedOpen = await t.restart({ security: { auth: { cacheMs: 60_000 } } });
    expect(await cachedOpen.apiKeys.mode()).toEqual({ required: false, reason: 'open' });
    const { key, apiKey } = await t.engine.apiKeys.create({ project: 'shop', env: 'prod' });
    expect(await cachedOpen.apiKeys.authenticate(bearer(key))).toEqual({ project: 'shop', env: 'prod', apiKeyId: apiKey.id });
    await expect(cachedOpen.apiKeys.authenticate({ ...bearer(key), environment: 'staging' })).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
  });

  it("a key's env is the call's: a header naming another env is PERMISSION_DENIED, and so is a worker whose labels.env names another", async () => {
    const { key } = await t.engine.apiKeys.create({ project: 'shop', env: 'prod' });
    await expect(t.engine.apiKeys.authenticate({ ...bearer(key), environment: 'staging' })).rejects.toMatchObject({ code: 'PERMISSION_DENIED', httpStatus: 403 });
    const scope = await t.engine.apiKeys.authenticate(bearer(key));
    await expect(t.engine.pull.register(scope, 'w-labelled', { worker_id: 'w-labelled', function_ids: [], labels: { env: 'staging' } })).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
    await t.engine.pull.register(scope, 'w-labelled', { worker_id: 'w-labelled', function_ids: [], labels: { env: 'prod' } });
    // Another env's key of the same project does not reach it.
    const staging = await scopeOfNewKey(t.engine, 'shop', 'staging');
    await expect(t.engine.pull.poll('w-labelled', 1, staging)).rejects.toMatchObject({ code: 'WORKER_NOT_FOUND' });
    await expect(t.engine.pull.heartbeat('w-labelled', { worker_id: 'w-labelled', jobs: [] }, staging)).rejects.toMatchObject({ code: 'WORKER_NOT_FOUND' });
    const workers = await t.db.store.read('test.workers', (tx) => tx.query(`SELECT id, project, env FROM workers`));
    expect(workers).toEqual([{ id: 'w-labelled', project: 'shop', env: 'prod' }]);
  });

  it('a revoked key is refused at once where it was revoked and within the cache period elsewhere; revoking every key never reopens the server', async () => {
    const { key, apiKey } = await t.engine.apiKeys.create({});
    const elsewhere = await t.restart({ security: { auth: { cacheMs: 0 } } });
    const cached = await t.restart({ security: { auth: { cacheMs: 60_000 } } });
    expect(await cached.apiKeys.authenticate(bearer(key))).toMatchObject({ apiKeyId: apiKey.id });

    const revoked = await t.engine.apiKeys.revoke(apiKey.prefix);
    expect(revoked).toMatchObject({ id: apiKey.id, revokedAt: expect.any(String) });
    expect((await t.engine.apiKeys.revoke(apiKey.id)).revokedAt).toBe(revoked.revokedAt);
    await expect(t.engine.apiKeys.revoke('0000000000000000')).rejects.toMatchObject({ code: 'API_KEY_NOT_FOUND', httpStatus: 404 });

    await expect(t.engine.apiKeys.authenticate(bearer(key))).rejects.toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringContaining('revoked') });
    await expect(elsewhere.apiKeys.authenticate(bearer(key))).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    // The documented window: a process that looked the key up recently trusts it until its cache period ends.
    expect(await cached.apiKeys.authenticate(bearer(key))).toMatchObject({ apiKeyId: apiKey.id });

    expect(await elsewhere.apiKeys.mode()).toEqual({ required: true, reason: 'keys' });
    await expect(elsewhere.apiKeys.authenticate({})).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
  });

  it('IRONFLOW_REQUIRE_API_KEY refuses calls before any key exists; only the admin key manages keys, and without one nobody does', async () => {
    const strict = await t.restart({ security: { auth: { requireApiKey: true, adminKey: ADMIN_KEY } } });
    expect(await strict.apiKeys.mode()).toEqual({ required: true, reason: 'setting' });
    await expect(strict.apiKeys.authenticate({})).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(strict.apiKeys.authenticateAdmin(undefined)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(strict.apiKeys.authenticateAdmin(`Bearer ${ADMIN_KEY}x`)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(strict.apiKeys.authenticateAdmin(`Bearer ${ADMIN_KEY}`)).resolves.toBeUndefined();

    const { key } = await strict.apiKeys.create({ project: 'p1' });
    // A project key is not the admin key; the admin key is not a project key.
    await expect(strict.apiKeys.authenticateAdmin(`Bearer ${key}`)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(strict.apiKeys.authenticate(bearer(ADMIN_KEY))).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });

    const noAdmin = await t.restart({ security: { auth: { requireApiKey: true } } });
    await expect(noAdmin.apiKeys.authenticateAdmin(`Bearer ${key}`)).rejects.toMatchObject({ code: 'PERMISSION_DENIED', message: expect.stringContaining('IRONFLOW_ADMIN_KEY') });
    await expect(noAdmin.apiKeys.authenticateAdmin(undefined)).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
  });

  it("a key never reaches another project's worker: its worker id cannot be taken over, polled or heartbeaten from another project", async () => {
    const shop = await scopeOfNewKey(t.engine, 'shop');
    const blog = await scopeOfNewKey(t.engine, 'blog');
    await t.engine.api.registerFunction(shop, { id: 'charge', mode: 'pull', triggers: [{ event: 'order' }] });
    await t.engine.pull.register(shop, 'w-shop', { worker_id: 'w-shop', function_ids: ['charge'] });
    await t.engine.api.trigger(shop, { event: 'order', data: {} });

    await expect(t.engine.pull.register(blog, 'w-shop', { worker_id: 'w-shop', function_ids: ['charge'] })).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
    await expect(t.engine.pull.poll('w-shop', 5, blog)).rejects.toMatchObject({ code: 'WORKER_NOT_FOUND' });
    await expect(t.engine.pull.heartbeat('w-shop', { worker_id: 'w-shop', jobs: [] }, blog)).rejects.toMatchObject({ code: 'WORKER_NOT_FOUND' });
    // The project's own key still polls its job.
    const jobs = await t.engine.pull.poll('w-shop', 5, shop);
    expect(jobs.map((j) => j.function_id)).toEqual(['charge']);
    // Functions and runs are per project too.
    expect(await t.engine.api.listFunctions(blog)).toEqual([]);
    expect((await t.engine.api.listRuns(blog, {})).runs).toEqual([]);
  });
});

async function scopeOfNewKey(engine: Engine, project: string, env = 'default'): Promise<CallScope> {
  const { key } = await engine.apiKeys.create({ project, env });
  return engine.apiKeys.authenticate(bearer(key));
}
