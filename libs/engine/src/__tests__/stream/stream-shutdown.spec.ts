/**
 * Engine shutdown with stream workers connected (WIRE-PROTOCOL.md 4.7, DESIGN.md "Defaults":
 * 25 s for streaming workers): every stream gets `shutdown` with `drain_timeout_ms` 25000, nothing
 * is assigned after it, and the engine waits for the jobs in flight to report before it stops.
 * Each test owns its engine (it is stopped by the test) and reads the outcome from the store
 * afterwards.
 */
import { createFunction, createStreamWorker } from '@ironflow/sdk';
import { openStore, runsSql } from '@ironflow/store';
import { STORES, waitFor } from '@ironflow/testing';
import { RawStreamWorker, startStreamEngine, StreamEngine, uid } from './stream-kit.test';

describe.each(STORES)('worker stream shutdown on %s', (dialect) => {
  let engine: StreamEngine;

  beforeEach(async () => {
    engine = await startStreamEngine(dialect);
  });

  afterEach(async () => {
    await engine.close();
  });

  async function readRun(runId: string) {
    const { store } = await openStore({ url: engine.databaseUrl });
    try {
      return await store.read('testReadRun', (tx) => runsSql.getRun(tx, runId));
    } finally {
      await store.close();
    }
  }

  it('sends shutdown (drain 25000 ms) to a connected worker, assigns nothing more, and commits the report of the job in flight before stopping', async () => {
    const fnId = uid('draining');
    const event = uid('drain.event');
    await engine.registerPullFunction(fnId, event);
    const workerId = uid('worker-stream');
    const raw = new RawStreamWorker(engine.port);
    try {
      raw.register(workerId, [fnId], 5);
      await raw.next('registered');
      const inFlight = await engine.trigger(event);
      const job = await raw.next('job');
      raw.send({ payload: { case: 'jobAck', value: { jobId: job.jobId, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });

      const started = Date.now();
      const closing = engine.server.close();
      const shutdown = await raw.next('shutdown');
      expect(shutdown.drainTimeoutMs).toBe(25_000);
      expect(shutdown.reason).not.toBe('');
      // `shutdown` goes out only after the delivery loop stopped: a run queued now is not assigned.
      const queued = await engine.trigger(event);

      raw.send({ payload: { case: 'jobCompleted', value: { jobId: job.jobId, output: { drained: true }, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
      await closing;
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(raw.unread('job')).toEqual([]);

      const done = await readRun(inFlight);
      expect(done).toMatchObject({ status: 'completed', output: { drained: true } });
      expect((await readRun(queued))?.status).toBe('waiting_for_capacity');
    } finally {
      raw.close();
    }
  });

  it('our SDK worker drains on shutdown: its running job reports, then it reconnects (it stops only when told)', async () => {
    const event = uid('sdk.drain');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let entered = false;
    const fn = createFunction({ id: uid('sdk-draining'), triggers: [{ event }] }, async ({ step }) => {
      entered = true;
      await step.run('block', () => released);
      return { finished: true };
    });
    const logged: string[] = [];
    const logger = { info: (m: string) => logged.push(m), warn: (m: string) => logged.push(m), error: (m: string) => logged.push(m) };
    const worker = createStreamWorker({ serverUrl: engine.url, functions: [fn], logger });
    await worker.start();
    try {
      const runId = await engine.trigger(event);
      await waitFor('handler running', () => entered);
      const closing = engine.server.close();
      await waitFor('the worker got shutdown', () => logged.includes('engine is shutting down; draining'));
      // Draining: the running job finishes and reports; then the worker reconnects, as after a
      // stream error, so a worker outlives a server restart.
      release();
      await closing;
      expect(await readRun(runId)).toMatchObject({ status: 'completed', output: { finished: true } });
      await waitFor('the worker to plan a reconnect', () => logged.some((m) => m.includes('reconnecting')));
    } finally {
      release();
      await worker.stop();
    }
  });
});
