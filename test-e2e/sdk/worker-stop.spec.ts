/**
 * A worker that stops gives its work back (issue 7 item 8), with real processes: a worker process
 * built on our SDK (REST and stream) runs a function whose step takes 60 s; once the step has
 * begun (the process says so) it gets SIGTERM. Its SDK's signal handler stops the worker, which
 * gives the job back (REST: the release route; stream: the closed stream), and the process ends.
 * A second worker then runs the run to completion. The lease is the default 90 s: the run
 * completes with no lease recovery at all (no `run.lease_recovered` row; `recoveries` 1, the one
 * release, which counts toward the recovery ceiling), which is what shows the lease was not
 * waited for; wall-clock time is not asserted.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createFunction, createWorker, Worker } from '@ironflow/sdk';
import { SCOPE, STORES, TestServer, startTestServer, waitFor } from '@ironflow/testing';
import { uid } from '../support/wire-harness';

const WORKER_SCRIPT = resolve(__dirname, '../support/sdk-worker-process.js');
const LEASE_MS = 90_000;

/** The worker process, with its stdout lines. */
function startWorkerProcess(env: Record<string, string>): { child: ChildProcess; lines: string[]; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; stderr: () => string } {
  const child = spawn(process.execPath, [WORKER_SCRIPT], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    lines.push(...parts);
  });
  // Its stderr goes to the test's failure message when it does not start (e.g. an option refused).
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8'); });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })));
  return { child, lines, exited, stderr: () => stderr };
}

describe.each(STORES)('a stopping worker gives its work back [%s]', (dialect) => {
  let engine: TestServer;

  beforeAll(async () => {
    engine = await startTestServer(dialect, 'ironflow_stop', { leaseMs: LEASE_MS });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it.each(['rest', 'stream'] as const)('%s: SIGTERM during a 60 s step; a second worker runs the run without waiting for the lease', async (transport) => {
    const fnId = uid(`stop-${transport}`);
    const event = uid('stop.event');
    const api = engine.server.runtime.engine.api;
    await api.registerFunction(SCOPE, { id: fnId, mode: 'pull', triggers: [{ event }] });
    const first = startWorkerProcess({ WORKER_TRANSPORT: transport, IRONFLOW_SERVER_URL: engine.server.url, FUNCTION_ID: fnId, EVENT_NAME: event });
    let second: Worker | undefined;
    try {
      await waitFor('the worker process to start', () => {
        if (first.child.exitCode !== null) throw new Error(`the worker process exited (${first.child.exitCode}) before it was ready: ${first.stderr()}`);
        return first.lines.includes('ready');
      }, 20_000);
      const { runIds: [runId] } = await api.trigger(SCOPE, { event, data: {} });
      // Mid-step: the job is the worker's (claimed, its step running); nothing else to wait for.
      await waitFor('the long step to start', () => first.lines.includes(`step-started ${runId}`), 20_000);
      first.child.kill('SIGTERM');
      const exit = await first.exited;
      // The SDK re-raises SIGTERM after giving the job back: the process ends as the signal ends it.
      expect(exit).toEqual({ code: null, signal: 'SIGTERM' });

      const fast = createFunction({ id: fnId, triggers: [{ event }] }, async ({ step }) => {
        const slow = await step.run('long', () => 'quick');
        return { by: 'second', slow };
      });
      second = createWorker({ transport, serverUrl: engine.server.url, functions: [fast], handleSignals: false, logger: { warn: () => undefined, error: () => undefined }, ...(transport === 'rest' ? { pollIntervalMs: 50 } : {}) } as Parameters<typeof createWorker>[0]);
      await second.start();
      // Well inside the lease: the run cannot have waited for it to expire.
      const run = await waitFor('the second worker to complete the run', async () => {
        const r = await api.getRun(SCOPE, runId);
        return r.status === 'completed' ? r : undefined;
      }, LEASE_MS / 3);
      expect(run.output).toEqual({ by: 'second', slow: 'quick' });
      const row = await engine.server.runtime.store.read('t', (tx) => tx.query<{ recoveries: unknown; execution_seq: unknown; attempt: unknown }>(`SELECT recoveries, execution_seq, attempt FROM runs WHERE id = $1`, [runId]));
      expect(row.map((r) => ({ recoveries: Number(r.recoveries), executionSeq: Number(r.execution_seq), attempt: Number(r.attempt) }))).toEqual([{ recoveries: 1, executionSeq: 2, attempt: 1 }]);
      await engine.server.runtime.engine.resources.followUps.drain(5_000);
      const { history } = await api.getRunSteps(SCOPE, runId);
      expect(history.filter((h) => h.eventType === 'run.execution_released')).toHaveLength(1);
      expect(history.filter((h) => h.eventType === 'run.lease_recovered')).toHaveLength(0);
    } finally {
      if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill('SIGKILL');
      await second?.stop();
    }
  }, 60_000);
});
