/**
 * Secrets (issue 9, item 4) on both stores: encrypted at rest under the secrets key, delivered
 * only to the segments of functions that declare them (push `secrets`, pull `context.secrets`),
 * never in run history, audit rows, GetRun, steps or metrics. A declared secret that is missing
 * at dispatch fails the attempt (retryable, `SECRET_NOT_FOUND`) instead of reaching a worker.
 */
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { Server, createServer } from 'node:http';
import { CallScope, PushRequest } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { WORKER, fenced, readLeases, readRun, registerWorker } from './engine-kit.test';

const KEY = randomBytes(32);
const VALUE = `sk_live_${randomBytes(12).toString('hex')}`;
const OTHER_ENV: CallScope = { project: 'default', env: 'staging' };

describe.each(STORES)('secrets [%s]', (dialect) => {
  let t: TestEngine;
  let logged: string[];

  beforeEach(async () => {
    logged = [];
    const record = (message: string, meta?: Record<string, unknown>) => void logged.push(`${message} ${JSON.stringify(meta ?? {})}`);
    t = await openTestEngine(dialect, { dispatchPollMs: 20 }, { security: { secretsKey: KEY }, logger: { log: record, warn: record, error: record } });
  });
  afterEach(async () => {
    await t.close();
  });

  async function rawSecretRows(): Promise<Record<string, unknown>[]> {
    return t.db.store.read('test.secrets', (tx) => tx.query(`SELECT project, env, name, ciphertext FROM secrets ORDER BY env, name`));
  }

  it('a secret is kept as AES-256-GCM ciphertext; listings show names and times, never the value', async () => {
    const created = await t.engine.secrets.set(SCOPE, 'STRIPE_KEY', VALUE);
    expect(created).toEqual({ name: 'STRIPE_KEY', createdAt: expect.any(String), updatedAt: created.createdAt });
    await t.engine.secrets.set(OTHER_ENV, 'STRIPE_KEY', 'staging-value');

    const rows = await rawSecretRows();
    expect(rows.map((r) => [r.env, r.name])).toEqual([['default', 'STRIPE_KEY'], ['staging', 'STRIPE_KEY']]);
    expect(String(rows[0].ciphertext)).toMatch(/^v1:/);
    expect(JSON.stringify(rows)).not.toContain(VALUE);
    expect(JSON.stringify(rows)).not.toContain('staging-value');

    const listed = await t.engine.secrets.list(SCOPE);
    expect(listed).toEqual([{ name: 'STRIPE_KEY', createdAt: created.createdAt, updatedAt: expect.any(String) }]);
    expect(JSON.stringify(listed)).not.toContain(VALUE);

    // Replacing keeps the creation time; deleting removes only this env's row.
    t.db.clock.advance(5);
    const replaced = await t.engine.secrets.set(SCOPE, 'STRIPE_KEY', 'rotated');
    expect(replaced.createdAt).toBe(created.createdAt);
    expect(Date.parse(replaced.updatedAt)).toBeGreaterThan(Date.parse(created.createdAt));
    await t.engine.secrets.delete(SCOPE, 'STRIPE_KEY');
    expect(await t.engine.secrets.list(SCOPE)).toEqual([]);
    expect(await t.engine.secrets.list(OTHER_ENV)).toHaveLength(1);
    await expect(t.engine.secrets.delete(SCOPE, 'STRIPE_KEY')).rejects.toMatchObject({ code: 'SECRET_NOT_FOUND', httpStatus: 404 });
  });

  it('bad names and values are refused with VALIDATION_ERROR and store nothing', async () => {
    for (const name of ['', '1ABC', 'has space', 'a/b', 'x'.repeat(129)]) {
      await expect(t.engine.secrets.set(SCOPE, name, 'v')).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    for (const value of ['', 42, null, undefined, 'x'.repeat(64 * 1024 + 1)]) {
      await expect(t.engine.secrets.set(SCOPE, 'OK_NAME', value)).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    await expect(t.engine.api.registerFunction(SCOPE, { id: 'bad-secret', mode: 'pull', secrets: ['ok', 'not ok'] })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining('secrets.1') });
    expect(await rawSecretRows()).toEqual([]);
  });

  it('a pull job carries exactly the declared secrets of its project and env in context.secrets; a function without secrets gets no context', async () => {
    await t.engine.secrets.set(SCOPE, 'API_TOKEN', VALUE);
    await t.engine.secrets.set(SCOPE, 'UNDECLARED', 'not for this function');
    await t.engine.secrets.set(OTHER_ENV, 'DB_PASSWORD', 'staging password');
    await t.engine.secrets.set(SCOPE, 'DB_PASSWORD', 'default password');
    await t.engine.api.registerFunction(SCOPE, { id: 'with-secrets', mode: 'pull', triggers: [{ event: 'go' }], secrets: ['API_TOKEN', 'DB_PASSWORD', 'API_TOKEN'] });
    await t.engine.api.registerFunction(SCOPE, { id: 'plain', mode: 'pull', triggers: [{ event: 'go' }] });
    expect((await t.engine.api.listFunctions(SCOPE)).find((f) => f.id === 'with-secrets')?.secrets).toEqual(['API_TOKEN', 'DB_PASSWORD']);
    await registerWorker(t, ['with-secrets', 'plain']);
    await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });

    const jobs = await t.engine.pull.poll(WORKER, 5);
    const byFn = Object.fromEntries(jobs.map((j) => [j.function_id, j]));
    expect(byFn['with-secrets'].context).toEqual({ secrets: { API_TOKEN: VALUE, DB_PASSWORD: 'default password' } });
    expect(byFn.plain).not.toHaveProperty('context');
  });

  it('a push request carries the declared secrets as `secrets`', async () => {
    const received: PushRequest[] = [];
    const server: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push(JSON.parse(body));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'completed', result: { ok: true }, steps: [] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      await t.engine.secrets.set(SCOPE, 'WEBHOOK_SECRET', VALUE);
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/ironflow`;
      await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: url, triggers: [{ event: 'push.go' }], secrets: ['WEBHOOK_SECRET'] });
      const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'push.go', data: {} });
      t.engine.start({ pushDispatch: true, scheduler: false });
      await waitFor('the run to complete', async () => (await readRun(t, runIds[0])).status === 'completed');
      expect(received).toHaveLength(1);
      expect(received[0].secrets).toEqual({ WEBHOOK_SECRET: VALUE });
    } finally {
      await t.engine.push.stop(5000);
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a declared secret missing at dispatch fails the attempt with SECRET_NOT_FOUND (retryable) without reaching a worker; once set, the retry gets it', async () => {
    await t.engine.api.registerFunction(SCOPE, { id: 'needs-secret', mode: 'pull', triggers: [{ event: 'go' }], secrets: ['LATE_SECRET'], retry: { maxAttempts: 2, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    await registerWorker(t, ['needs-secret']);
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });

    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
    const failed = await readRun(t, runIds[0]);
    expect(failed).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, error: { code: 'SECRET_NOT_FOUND', retryable: true } });
    expect(failed.error?.message).toContain('LATE_SECRET');
    expect(await readLeases(t, runIds[0])).toEqual([]);

    await t.engine.secrets.set(SCOPE, 'LATE_SECRET', VALUE);
    const [job] = await t.engine.pull.poll(WORKER, 5);
    expect(job).toMatchObject({ run_id: runIds[0], attempt: 2, context: { secrets: { LATE_SECRET: VALUE } } });
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { done: true } }));
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'completed' });
  });

  it('a dispatcher whose secrets key is not the one that encrypted fails the attempt with SECRETS_UNAVAILABLE; one without a key refuses to set secrets or register functions that declare them', async () => {
    await t.engine.secrets.set(SCOPE, 'TOKEN', VALUE);
    await t.engine.api.registerFunction(SCOPE, { id: 'wrong-key', mode: 'pull', triggers: [{ event: 'go' }], secrets: ['TOKEN'], retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    const other = await t.restart({ security: { secretsKey: randomBytes(32) } });
    await other.pull.register(SCOPE, 'w2', { worker_id: 'w2', function_ids: ['wrong-key'] });
    const { runIds } = await other.api.trigger(SCOPE, { event: 'go', data: {} });
    expect(await other.pull.poll('w2', 5)).toEqual([]);
    const run = await readRun(t, runIds[0]);
    expect(run).toMatchObject({ status: 'failed', error: { code: 'SECRETS_UNAVAILABLE', retryable: true } });
    expect(JSON.stringify(run.error)).not.toContain(VALUE);

    const keyless = await t.restart({ security: {} });
    await expect(keyless.secrets.set(SCOPE, 'TOKEN', 'x')).rejects.toMatchObject({ code: 'SECRETS_NOT_CONFIGURED', httpStatus: 503 });
    await expect(keyless.api.registerFunction(SCOPE, { id: 'declares', mode: 'pull', secrets: ['TOKEN'] })).rejects.toMatchObject({ code: 'SECRETS_NOT_CONFIGURED' });
    // Reading names needs no key.
    expect((await keyless.secrets.list(SCOPE)).map((s) => s.name)).toEqual(['TOKEN']);
  });

  it('secret values never reach GetRun, steps, run history, audit rows, events, runs, metrics or logs', async () => {
    await t.engine.secrets.set(SCOPE, 'TOKEN', VALUE);
    // An undelivered segment too (it logs): a function declaring a secret that does not exist.
    await t.engine.api.registerFunction(SCOPE, { id: 'half-configured', mode: 'pull', triggers: [{ event: 'go' }], secrets: ['TOKEN', 'MISSING'], retry: { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    await t.engine.api.registerFunction(SCOPE, { id: 'audited', mode: 'pull', triggers: [{ event: 'go' }], secrets: ['TOKEN'], retry: { maxAttempts: 2, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    await registerWorker(t, ['audited', 'half-configured']);
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'go', data: { n: 1 } });
    const runId = (await t.engine.api.listRuns(SCOPE, { functionId: 'audited' })).runs[0].id;
    expect(runIds).toContain(runId);
    // A retried attempt and a completed one, with a step: every kind of row gets written.
    const [first, ...others] = await t.engine.pull.poll(WORKER, 5);
    expect(others).toEqual([]);
    expect(first.context?.secrets).toEqual({ TOKEN: VALUE });
    await t.engine.pull.update(WORKER, first.job_id, fenced(first, { status: 'failed', error: { message: 'boom', retryable: true } }));
    const [second] = await t.engine.pull.poll(WORKER, 5);
    await t.engine.pull.update(WORKER, second.job_id, fenced(second, {
      status: 'completed',
      output: { ok: 1 },
      steps: [{ id: `${runId}:s:0`, name: 's', type: 'invoke', status: 'completed', output: { fine: true } }],
      step_offset: 0,
    }));
    await t.engine.resources.followUps.drain(10_000);

    const views = JSON.stringify([await t.engine.api.getRun(SCOPE, runId), await t.engine.api.getRunSteps(SCOPE, runId), await t.engine.api.listRuns(SCOPE, {})]);
    expect(views).toContain('"status":"completed"');
    expect(views).toContain('run.retry_scheduled');
    const tables = await t.db.store.read('test.dump', async (tx) => {
      const dump: unknown[] = [];
      for (const table of ['runs', 'steps', 'events', 'audit_events', 'functions', 'leases', 'workers']) dump.push(await tx.query(`SELECT * FROM ${table}`));
      return JSON.stringify(dump);
    });
    expect(tables).toContain(runId);
    const metrics = await t.engine.resources.metrics.registry.metrics();
    expect(logged.join('\n')).toContain('SECRET_NOT_FOUND');
    for (const text of [views, tables, metrics, logged.join('\n')]) expect(text).not.toContain(VALUE);
  });
});
