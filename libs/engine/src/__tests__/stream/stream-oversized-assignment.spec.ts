/**
 * A stream job assignment larger than the stream's message limit (`IRONFLOW_STREAM_MAX_MESSAGE_BYTES`)
 * is never sent: the worker could not read it and its stream would break, and the run would wait
 * for lease recovery. Its attempt fails at once with `PAYLOAD_TOO_LARGE`, not retryable, and the
 * stream goes on with the next job. On SQLite and PostgreSQL, with a raw `@grpc/grpc-js` worker.
 */
import { STORES } from '@ironflow/testing';
import { RawStreamWorker, SCOPE, startStreamEngine, StreamEngine, uid } from './stream-kit.test';

const LIMIT_BYTES = 64 * 1024;

describe.each(STORES)('oversized stream job assignments on %s', (dialect) => {
  let engine: StreamEngine;

  beforeAll(async () => {
    engine = await startStreamEngine(dialect, { streamMaxMessageBytes: LIMIT_BYTES });
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('an assignment over the stream message limit fails its attempt at once with PAYLOAD_TOO_LARGE; the stream stays open and gets the next job', async () => {
    const fnId = uid('stream-big');
    const event = uid('big.event');
    await engine.server.runtime.engine.api.registerFunction(SCOPE, { id: fnId, mode: 'pull', triggers: [{ event }], retry: { maxAttempts: 3, initialDelayMs: 10, backoffFactor: 1, maxDelayMs: 10 } });
    const workerId = uid('worker-big');
    const raw = new RawStreamWorker(engine.port);
    try {
      raw.register(workerId, [fnId], 5);
      await raw.next('registered');
      const big = await engine.trigger(event, { blob: 'x'.repeat(LIMIT_BYTES) });
      const run = await engine.waitForRun(big, (r) => r.status === 'failed', 'the oversized run to fail');
      expect(run.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', retryable: false });
      expect(run.error?.message).toContain(`${LIMIT_BYTES}-byte message limit`);
      expect(run.attempt).toBe(1);
      expect(raw.unread('job')).toEqual([]);

      const small = await engine.trigger(event, { blob: 'small' });
      const job = await raw.next('job');
      expect(job.runId).toBe(small);
      expect(raw.status).toBeUndefined();
    } finally {
      raw.close();
    }
  });
});
