import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { waitFor } from '@ironflow/testing';
import { freePort } from '../support/service-processes';

const ROOT = resolve(__dirname, '../..');
const DEMO = join(ROOT, 'dist/examples/order-fulfilment/src/demo.js');

/**
 * The README's first command, as a new user runs it: the built demo starts `ironflow dev` as its
 * own process (SQLite), runs the example through a push endpoint and a pull worker, and exits 0
 * only when both runs completed with the expected output.
 */
describe('order-fulfilment example against ironflow dev (separate process)', () => {
  it('completes order.process through push and through pull, with the child retry', async () => {
    expect(existsSync(DEMO)).toBe(true); // npm test builds first
    const port = await freePort();
    const cwd = mkdtempSync(join(tmpdir(), 'ironflow-example-'));
    const child = spawn(process.execPath, [DEMO, '--exit'], {
      cwd,
      env: { ...process.env, IRONFLOW_SERVER_URL: `http://127.0.0.1:${port}`, PUSH_PORT: '0' },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((res) => child.on('exit', res));
    expect({ code, tail: out.slice(-2000) }).toMatchObject({ code: 0 });
    expect(out).toContain('both runs completed with the expected output');
    expect(out.match(/"status":"shipped"/g)).toHaveLength(2);
    expect(out.match(/payment\.charge completed on attempt 2/g)).toHaveLength(2);
    expect(out).toContain('run.retry_scheduled');
    // On a port of its own, the hints it prints reach that port when copied.
    expect(out).toMatch(new RegExp(`^inspect: npm run ironflow -- --server http://127\\.0\\.0\\.1:${port} run get [0-9a-f-]{36}$`, 'm'));
    // `ironflow dev` without keys says at start that it is open.
    expect(out).toContain('API keys: none, so this server is OPEN');
    expect(existsSync(join(cwd, '.ironflow/dev.db'))).toBe(true);
  }, 90_000);

  it('stops its ironflow dev when it is sent SIGTERM mid-demo (the dev server is never left running); IRONFLOW_PORT alone picks the dev server\'s port', async () => {
    const port = await freePort();
    const cwd = mkdtempSync(join(tmpdir(), 'ironflow-example-'));
    const env: NodeJS.ProcessEnv = { ...process.env, IRONFLOW_PORT: String(port), PUSH_PORT: '0' };
    delete env.IRONFLOW_SERVER_URL;
    const child = spawn(process.execPath, [DEMO, '--exit'], { cwd, env });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((res) => child.on('exit', res));
    await waitFor('the demo to start its runs', () => out.includes('=== push'), 60_000);
    // Before, the demo ignored IRONFLOW_PORT and started (or used whatever answered on) 9123.
    expect(out).toContain(`Ironflow dev server ready at http://localhost:${port} `);
    child.kill('SIGTERM');
    expect(await exited).toBe(143);
    // The demo exits once its dev server has: nothing answers on the port any more.
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  }, 90_000);
});
