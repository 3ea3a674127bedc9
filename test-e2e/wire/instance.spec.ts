/**
 * Golden wire tests of the instance authority's admin routes (README "Freezing an instance";
 * issue 10 item 3), with raw HTTP/1.1 (nothing from `libs/sdk`), on both stores: the routes take
 * only the admin key, a freeze and a thaw answer `{changed, status}`, a second freeze changes
 * nothing, and unknown body fields are refused (what a freeze holds: libs/engine contract tests).
 */
import { randomBytes } from 'node:crypto';
import { rest, startWireEngine, WIRE_STORES, WireEngine } from '../support/wire-harness';

const ADMIN_KEY = `admin-${randomBytes(24).toString('hex')}`;

describe.each(WIRE_STORES)('wire: instance freeze and thaw (%s)', (store) => {
  let engine: WireEngine;
  const admin = { authorization: `Bearer ${ADMIN_KEY}` };

  beforeAll(async () => {
    engine = await startWireEngine(store, { adminKey: ADMIN_KEY });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it('takes only the admin key', async () => {
    const created = await rest(engine.url, 'POST', '/api/v1/api-keys', { name: 'client' }, 'default', admin);
    expect(created.status).toBe(201);
    const client = { authorization: `Bearer ${created.json.key}` };
    for (const [method, path] of [['GET', '/api/v1/instance'], ['POST', '/api/v1/instance/freeze'], ['POST', '/api/v1/instance/thaw']] as const) {
      const res = await rest(engine.url, method, path, method === 'POST' ? {} : undefined, 'default', client);
      expect([path, res.status, res.json.code]).toEqual([path, 401, 'UNAUTHENTICATED']);
    }
    expect((await rest(engine.url, 'GET', '/api/v1/instance', undefined, 'default', admin)).json).toMatchObject({ state: 'thawed', version: 0, since: null, by: null });
  });

  it('freezes with a reason, a second freeze changes nothing, unknown fields are refused, and thaws', async () => {
    const unknown = await rest(engine.url, 'POST', '/api/v1/instance/freeze', { reason: 'x', force: true }, 'default', admin);
    expect(unknown.status).toBe(400);
    expect(unknown.json).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining('force') });
    expect((await rest(engine.url, 'GET', '/api/v1/instance', undefined, 'default', admin)).json).toMatchObject({ state: 'thawed' });

    const frozen = await rest(engine.url, 'POST', '/api/v1/instance/freeze', { reason: 'backup' }, 'default', admin);
    expect(frozen.status).toBe(200);
    expect(frozen.json).toMatchObject({ changed: true, status: { state: 'frozen', version: 1, by: 'admin', reason: 'backup', since: expect.any(String) } });
    expect((await rest(engine.url, 'POST', '/api/v1/instance/freeze', {}, 'default', admin)).json).toMatchObject({ changed: false, status: { state: 'frozen', version: 1, reason: 'backup' } });
    const status = await rest(engine.url, 'GET', '/api/v1/instance', undefined, 'default', admin);
    expect(status.json).toMatchObject({ state: 'frozen', held: { queued: expect.any(Number), admissions: expect.any(Number), sleeps: expect.any(Number), wakes: expect.any(Number), total: expect.any(Number) } });

    const thawed = await rest(engine.url, 'POST', '/api/v1/instance/thaw', {}, 'default', admin);
    expect(thawed.status).toBe(200);
    expect(thawed.json).toMatchObject({ changed: true, status: { state: 'thawed', version: 2, by: 'admin', reason: null } });
  });
});
