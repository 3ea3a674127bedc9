import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');

/**
 * The hard cap of a shutdown (`IRONFLOW_SHUTDOWN_TIMEOUT_MS`), in a real process: `exitOnSignals`
 * from the build output over a server whose drain never ends (a push call or a follow-up stuck
 * forever). SIGTERM must end the process at the cap with exit 1 and one fatal line saying so.
 */
describe('shutdown hard cap', () => {
  it('exits 1 at the cap when the drain never ends, logging that the cap was reached', async () => {
    const script = `
      const { exitOnSignals } = require(${JSON.stringify(resolve(ROOT, 'dist/libs/services/src/shutdown.js'))});
      const { createProcessLogger } = require(${JSON.stringify(resolve(ROOT, 'dist/libs/observability/src/process-logger.js'))});
      const server = { runtime: { settings: { shutdownTimeoutMs: 1500 } }, close: () => new Promise(() => {}) };
      exitOnSignals(server, createProcessLogger({ service: 'stuck' }));
      setInterval(() => {}, 1000);
      console.log('{"ready":true}');
    `;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    const deadline = Date.now() + 20_000;
    while (!out.includes('"ready":true') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const signalled = Date.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(1);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(1400);
    const lines = out.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { ready: true },
      expect.objectContaining({ level: 'info', service: 'stuck', msg: 'SIGTERM: draining (exit within 1500 ms)' }),
      expect.objectContaining({ level: 'fatal', msg: 'shutdown cap of 1500 ms reached: exiting before the drain finished', shutdown_timeout_ms: 1500 }),
    ]);
  });
});
