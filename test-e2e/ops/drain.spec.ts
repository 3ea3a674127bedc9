import { createServer, Server } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, createFunction, serve } from '@ironflow/sdk';
import { waitFor } from '@ironflow/testing';
import { ServiceProcess, devApp, freePort } from '../support/service-processes';

/**
 * Graceful drain of a real process (README "Shutdown"): `ironflow dev` from the build output with
 * a push function served here, SIGTERM while a TriggerSync waits on a run whose push call is in
 * flight. `/ready` answers 503 at once; the caller gets its outcome, or — when the run cannot end
 * within the drain — a retryable `unavailable` naming the run, never a cut connection; the
 * process exits within `IRONFLOW_SHUTDOWN_TIMEOUT_MS`.
 */
describe('SIGTERM drain of a service process', () => {
  let push: Server;
  let pushUrl: string;
  let release!: () => void;
  let entered: string[] = [];

  const slow = createFunction({ id: 'drain.slow', mode: 'push', triggers: [{ event: 'drain.go' }] }, async ({ step, run }) => {
    entered.push(run.id);
    await step.run('hold', () => new Promise<void>((resolve) => (release = resolve)));
    return { drained: true };
  });

  beforeAll(async () => {
    push = createServer(serve({ functions: [slow] }));
    await new Promise<void>((r) => push.listen(0, '127.0.0.1', r));
    pushUrl = `http://127.0.0.1:${(push.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    release?.();
    push.closeAllConnections();
    await new Promise((r) => push.close(r));
  });
  const started: ServiceProcess[] = [];
  beforeEach(() => {
    entered = [];
  });
  afterEach(async () => {
    release?.();
    for (const p of started.splice(0)) await p.kill9();
  });

  /** Starts `ironflow dev` with `capMs`, registers the function and sends a TriggerSync (raw Connect JSON) that waits on it. */
  async function startWithSyncCallInFlight(capMs: number) {
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-drain-'));
    const dev = new ServiceProcess(devApp(join(dir, 'dev.db')), await freePort(), { IRONFLOW_SHUTDOWN_TIMEOUT_MS: String(capMs), IRONFLOW_LOG_LEVEL: 'info' });
    started.push(dev);
    await dev.start();
    await createClient({ serverUrl: dev.url }).registerFunction(slow, { endpointUrl: pushUrl });
    const answer = fetch(`${dev.url}/ironflow.v1.IronflowService/TriggerSync`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ event: 'drain.go', data: {}, timeoutMs: 120_000 }),
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as Record<string, unknown> }));
    const runId = await waitFor('the push call to be in flight', () => entered[0]);
    return { dev, answer, runId };
  }

  it('answers /ready 503 at once, lets the TriggerSync in flight get its outcome, and exits 0', async () => {
    const { dev, answer, runId } = await startWithSyncCallInFlight(30_000);
    try {
      dev.terminate();
      const ready = await waitFor('/ready to answer 503', async () => {
        const res = await fetch(`${dev.url}/ready`);
        return res.status === 503 ? res.json() : undefined;
      });
      expect(ready).toEqual({ status: 'draining' });
      release();
      const { status, body } = await answer;
      expect(status).toBe(200);
      expect(body.results).toEqual([expect.objectContaining({ runId, status: 'completed', output: { drained: true } })]);
      expect(await dev.exited).toBe(0);
    } finally {
      release();
    }
  });

  it('a run that cannot end within the drain: the TriggerSync gets a retryable unavailable naming the run, and the process exits 0 after the drain, its push call left to lease recovery', async () => {
    const { dev, answer, runId } = await startWithSyncCallInFlight(8000);
    try {
      dev.terminate();
      const { status, body } = await answer; // resolves: never a reset connection
      expect(status).toBe(503);
      expect(body).toMatchObject({ code: 'unavailable', ironflowCode: 'UNAVAILABLE' });
      expect(String(body.message)).toContain(`run ${runId} (drain.slow) is running`);
      expect(JSON.stringify(body.details)).toContain(runId);
      // The push call never answers: it is left to lease recovery and does not hold the exit, so the
      // drain ends the process (0), not the hard cap (1; before, closing the push connection pool
      // waited for the open call until the cap).
      expect(await dev.exited).toBe(0);
      expect(dev.stdout.join('') + dev.log.join('')).not.toContain('shutdown cap of 8000 ms reached');
    } finally {
      release();
    }
  });

  it('a TriggerSync that arrives during the drain is refused with unavailable before it starts a run', async () => {
    const { dev, runId } = await startWithSyncCallInFlight(30_000);
    try {
      dev.terminate();
      await waitFor('/ready to answer 503', async () => (await fetch(`${dev.url}/ready`)).status === 503);
      const late = await fetch(`${dev.url}/ironflow.v1.IronflowService/TriggerSync`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ event: 'drain.go', data: {} }),
      });
      expect(late.status).toBe(503);
      expect(await late.json()).toMatchObject({ code: 'unavailable', ironflowCode: 'UNAVAILABLE' });
      expect(entered).toEqual([runId]);
      release();
      expect(await dev.exited).toBe(0);
    } finally {
      release();
    }
  });
});
