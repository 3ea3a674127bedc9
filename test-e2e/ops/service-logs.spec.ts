import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { NonRetryableError, createClient, createFunction, serve } from '@ironflow/sdk';
import { waitFor } from '@ironflow/testing';
import { ServiceProcess, devApp, freePort } from '../support/service-processes';

const ROOT = resolve(__dirname, '../..');

/** Runs a service from the build output with `env` until it exits; its stdout and stderr. */
function runToExit(app: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [resolve(ROOT, `dist/apps/${app}/src/main.js`)], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((res) => child.on('exit', (code) => res({ code, stdout, stderr })));
}

/** Service processes as an operator sees them: structured lines in a pipe, short start-up errors. */
describe('service logs', () => {
  it.each([
    ['IRONFLOW_PORT', { IRONFLOW_PORT: 'abc' }],
    ['IRONFLOW_DATABASE_URL', { IRONFLOW_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', IRONFLOW_PORT: '0' }],
    ['IRONFLOW_LOG_LEVEL', { IRONFLOW_LOG_LEVEL: 'loud', IRONFLOW_PORT: '0' }],
    ['IRONFLOW_LEASE_MSS: not a setting (did you mean IRONFLOW_LEASE_MS?)', { IRONFLOW_LEASE_MSS: '5000', IRONFLOW_PORT: '0' }],
  ])('a bad %s stops the service with one JSON line naming it, without a stack', async (variable, env) => {
    const { code, stdout, stderr } = await runToExit('api-gateway', env);
    expect(code).toBe(1);
    expect(stderr).toBe('');
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]);
    expect(line).toMatchObject({ level: 'fatal', service: 'api-gateway' });
    expect(line.msg).toContain(`api-gateway could not start: `);
    expect(line.msg).toContain(variable);
    expect(line.stack).toBeUndefined();
    expect(stdout).not.toMatch(/\n\s+at /);
  });

  it('in a pipe a service writes JSON lines without colours and without Nest route mapping at info', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-logs-'));
    const gateway = new ServiceProcess('api-gateway', await freePort(), { IRONFLOW_DATABASE_URL: `sqlite:${join(dir, 'gw.db')}`, IRONFLOW_NODE_ID: 'gw-7' });
    await gateway.start();
    expect(await gateway.stop()).toBe(0);
    const text = gateway.stdout.join('');
    expect(text).not.toMatch(/\x1b\[/);
    const lines = text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.msg)).toEqual([`api-gateway ready at http://127.0.0.1:${gateway.port}`, 'SIGTERM: draining (exit within 30000 ms)', 'stopped']);
    for (const line of lines) expect(line).toMatchObject({ level: 'info', service: 'api-gateway', node_id: 'gw-7', time: expect.any(String) });
    // The ready line says whether the gateway calls push endpoints itself and whether it signs them.
    expect(lines[0]).toMatchObject({ gateway_push: true, push_signed: false });
  });
});

/** `ironflow dev` shows a developer what runs: one stdout line per run outcome. */
describe('ironflow dev activity', () => {
  let push: Server;
  let dev: ServiceProcess | undefined;
  const ok = createFunction({ id: 'dev.ok', mode: 'push', triggers: [{ event: 'dev.ok' }] }, async ({ step }) => step.run('work', async () => ({ fine: true })));
  const bad = createFunction({ id: 'dev.bad', mode: 'push', triggers: [{ event: 'dev.bad' }] }, async () => {
    throw new NonRetryableError('card declined', { code: 'CARD_DECLINED' });
  });

  beforeAll(async () => {
    push = createServer(serve({ functions: [ok, bad] }));
    await new Promise<void>((r) => push.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    await dev?.kill9();
    push.closeAllConnections();
    await new Promise((r) => push.close(r));
  });

  it('prints "run <id> <function> completed in N ms" and "failed <CODE>: message"', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-dev-activity-'));
    dev = new ServiceProcess(devApp(join(dir, 'dev.db')), await freePort(), {});
    await dev.start();
    const client = createClient({ serverUrl: dev.url });
    const endpointUrl = `http://127.0.0.1:${(push.address() as AddressInfo).port}/`;
    await client.registerFunction(ok, { endpointUrl });
    await client.registerFunction(bad, { endpointUrl });
    const [okRun] = (await client.emit('dev.ok', {})).runIds;
    const [badRun] = (await client.emit('dev.bad', {})).runIds;
    const out = () => dev!.stdout.join('');
    await waitFor('both outcome lines', () => out().includes(`run ${okRun} `) && out().includes(`run ${badRun} `), 20_000);
    expect(out()).toMatch(new RegExp(`^run ${okRun} dev\\.ok completed in \\d+ ms$`, 'm'));
    expect(out()).toMatch(new RegExp(`^run ${badRun} dev\\.bad failed CARD_DECLINED: card declined$`, 'm'));
  });

  it('drains and exits 0 on SIGTERM after the reader of its stdout went away (EPIPE), without a stack', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-dev-epipe-'));
    const port = await freePort();
    const child = spawn(process.execPath, [resolve(ROOT, 'dist/apps/ironflow/src/main.js'), 'dev', '--db', join(dir, 'dev.db'), '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    try {
      // Its last start-up line: the signal handlers are installed in the same tick.
      await waitFor('the start-up lines', () => stdout.includes('Secrets: '), 60_000);
      const closed = new Promise((res) => child.stdout.once('close', res));
      child.stdout.destroy(); // as `ironflow dev | head -1` once head has its line
      await closed;
      // A run's outcome line, then "stopping…", meet the closed pipe.
      const client = createClient({ serverUrl: `http://127.0.0.1:${port}` });
      const unreachable = createFunction({ id: 'dev.epipe', triggers: [{ event: 'dev.epipe' }], retry: { maxAttempts: 1 } }, async () => null);
      await client.registerFunction(unreachable, { endpointUrl: `http://127.0.0.1:${await freePort()}/` });
      const [runId] = (await client.emit('dev.epipe', {})).runIds;
      await waitFor('the run failed', async () => (await client.getRun(runId)).status === 'failed', 20_000);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(stderr).not.toContain('EPIPE');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
