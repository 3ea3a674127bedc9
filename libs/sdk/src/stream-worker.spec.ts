import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { EngineMessage, EngineMessageSchema, JobAssignmentSchema, WorkerMessage, WorkerMessageSchema } from '@ironflow/contracts/proto';
import { createFunction } from './function';
import { CONNECT_METHOD_PATH } from './stream-codec';
import { DEFAULT_MAX_REPORT_BYTES, StreamWorker, StreamWorkerOptions, createStreamWorker, messageLimitOf } from './stream-worker';
import { deferred, waitFor } from './testing/fake-server';

type EngineInit = MessageInitShape<typeof EngineMessageSchema>;
type Payload<C extends WorkerMessage['payload']['case']> = Extract<WorkerMessage['payload'], { case: C }>['value'];

/** One worker stream as the fake engine sees it. */
class FakeStream {
  readonly received: WorkerMessage[] = [];
  /** When the worker half-closed its side (`end` of the request stream), in ms since epoch. */
  halfClosedAt?: number;
  ended = false;

  constructor(readonly call: grpc.ServerDuplexStream<WorkerMessage, EngineMessage>) {
    call.on('data', (message: WorkerMessage) => this.received.push(message));
    call.on('end', () => (this.halfClosedAt = Date.now()));
    call.on('error', () => undefined);
  }

  send(init: EngineInit): void {
    this.call.write(create(EngineMessageSchema, init));
  }

  /** Ends the stream with OK, or with the given error status. */
  end(error?: { code: grpc.status; details: string }): void {
    if (this.ended) return;
    this.ended = true;
    if (error) this.call.emit('error', error);
    else this.call.end();
  }

  all<C extends NonNullable<WorkerMessage['payload']['case']>>(kind: C): Payload<C>[] {
    return this.received.filter((m) => m.payload.case === kind).map((m) => m.payload.value as Payload<C>);
  }
}

/** A fake engine speaking `WorkerService/Connect` over gRPC (h2c), recording every stream. */
class FakeStreamEngine {
  readonly streams: FakeStream[] = [];
  /** When each stream was opened, in ms since epoch. */
  readonly openedAt: number[] = [];
  private server: grpc.Server;
  url = '';

  constructor(
    private readonly onOpen: (stream: FakeStream, index: number) => void = (s) => s.send(registered()),
    options: grpc.ServerOptions = {},
  ) {
    this.server = new grpc.Server(options);
    this.server.register(
      CONNECT_METHOD_PATH,
      (call: grpc.ServerDuplexStream<WorkerMessage, EngineMessage>) => {
        const stream = new FakeStream(call);
        this.streams.push(stream);
        this.openedAt.push(Date.now());
        // Answer once `register` (the first message) has arrived.
        const index = this.streams.length - 1;
        const onFirst = () => {
          call.off('data', onFirst);
          this.onOpen(stream, index);
        };
        call.on('data', onFirst);
      },
      (message: EngineMessage) => Buffer.from(toBinary(EngineMessageSchema, message)),
      (bytes: Buffer) => fromBinary(WorkerMessageSchema, bytes),
      'bidi',
    );
  }

  async start(): Promise<this> {
    const port = await new Promise<number>((resolve, reject) => this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    this.url = `http://127.0.0.1:${port}`;
    return this;
  }

  close(): void {
    for (const s of this.streams) s.end();
    this.server.forceShutdown();
  }
}

const registered = (heartbeatIntervalMs = 60_000): EngineInit => ({ payload: { case: 'registered', value: { workerId: 'w', heartbeatIntervalMs } } });

function jobMessage(jobId: string, seq: number, token: string, functionId = 'orders'): EngineInit {
  const assignment: MessageInitShape<typeof JobAssignmentSchema> = {
    jobId,
    runId: `run-${jobId}`,
    functionId,
    attempt: 1,
    event: { id: 'evt-1', name: 'order.created' },
    eventDataJson: '{"orderId":"o-1"}',
    executionSeq: BigInt(seq),
    leaseToken: token,
  };
  return { payload: { case: 'job', value: assignment } };
}

interface Recorder {
  lines: string[];
  logger: NonNullable<StreamWorkerOptions['logger']>;
}

function recorder(): Recorder {
  const lines: string[] = [];
  const push = (m: string) => void lines.push(m);
  return { lines, logger: { info: push, warn: push, error: push } };
}

describe('createStreamWorker (gRPC stream)', () => {
  let engine: FakeStreamEngine;
  let worker: StreamWorker | undefined;

  const start = async (options: Partial<StreamWorkerOptions> & Pick<StreamWorkerOptions, 'functions'>) => {
    worker = createStreamWorker({ serverUrl: engine.url, registerFunctions: false, reconnectDelayMs: 20, heartbeatIntervalMs: 60_000, logger: recorder().logger, ...options });
    await worker.start();
    return worker;
  };

  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    engine?.close();
  });

  it('on shutdown takes no new job, lets the job in flight report, half-closes, then reconnects after reconnectDelayMs', async () => {
    const gate = deferred();
    const fn = createFunction({ id: 'orders' }, async () => {
      await gate.promise;
      return { drained: true };
    });
    engine = await new FakeStreamEngine().start();
    const log = recorder();
    const w = await start({ functions: [fn], reconnectDelayMs: 300, logger: log.logger });
    const first = engine.streams[0];
    first.send(jobMessage('job-1', 3, 'tok-1'));
    await waitFor(() => first.all('jobAck').length === 1, 'the ack of job-1');

    first.send({ payload: { case: 'shutdown', value: { reason: 'engine is shutting down', drainTimeoutMs: 25_000 } } });
    await waitFor(() => log.lines.includes('engine is shutting down; draining'), 'the shutdown');
    first.send(jobMessage('job-2', 1, 'tok-2'));
    await waitFor(() => log.lines.includes('assignment not taken (running, at capacity or draining)'), 'job-2 refused');
    expect(first.halfClosedAt).toBeUndefined();

    gate.resolve();
    await waitFor(() => first.halfClosedAt, 'the worker to half-close the drained stream');
    expect(first.all('jobCompleted')).toEqual([expect.objectContaining({ jobId: 'job-1', executionSeq: 3n, leaseToken: 'tok-1', outputJson: '{"drained":true}' })]);
    expect(first.all('jobAck').map((a) => a.jobId)).toEqual(['job-1']);
    first.end();

    await waitFor(() => engine.streams.length === 2 && engine.streams[1].all('register').length === 1, 'a new stream with register', 3_000);
    expect(engine.openedAt[1] - first.halfClosedAt!).toBeGreaterThanOrEqual(295);
    expect(engine.streams[1].all('register')[0].workerId).toBe(w.workerId);
    // The worker still runs: it takes jobs on the new stream.
    engine.streams[1].send(jobMessage('job-3', 1, 'tok-3'));
    await waitFor(() => engine.streams[1].all('jobCompleted').length === 1 || undefined, 'job-3 on the new stream');
  });

  it('on shutdown reconnects when the engine closes the stream first, and sends a report finished meanwhile on the new stream', async () => {
    const gate = deferred();
    const fn = createFunction({ id: 'orders' }, async () => {
      await gate.promise;
      return 'late';
    });
    // The second stream is answered only when the test says so.
    const answerSecond = deferred();
    engine = await new FakeStreamEngine((s, i) => (i === 0 ? s.send(registered()) : void answerSecond.promise.then(() => s.send(registered())))).start();
    const log = recorder();
    await start({ functions: [fn], reconnectDelayMs: 200, logger: log.logger });
    const first = engine.streams[0];
    first.send(jobMessage('job-1', 2, 'tok-a'));
    await waitFor(() => first.all('jobAck').length === 1, 'the ack');
    first.send({ payload: { case: 'shutdown', value: { reason: 'restart', drainTimeoutMs: 25_000 } } });
    await waitFor(() => log.lines.includes('engine is shutting down; draining'), 'the shutdown');
    first.end({ code: grpc.status.UNAVAILABLE, details: 'server closed' });
    await waitFor(() => log.lines.includes('worker stream ended after the engine shut down; reconnecting'), 'the stream end');

    gate.resolve();
    await waitFor(() => log.lines.includes('no open stream; report kept for the next one'), 'the report kept');
    await waitFor(() => engine.streams.length === 2, 'the reconnect');
    expect(engine.streams[1].all('jobCompleted')).toEqual([]);
    answerSecond.resolve();
    await waitFor(() => engine.streams[1].all('jobCompleted').length === 1, 'the kept report on the new stream');
    expect(engine.streams[1].all('jobCompleted')[0]).toMatchObject({ jobId: 'job-1', executionSeq: 2n, leaseToken: 'tok-a', outputJson: '"late"' });
    expect(first.all('jobCompleted')).toEqual([]);
  });

  it('stop() while draining after shutdown ends the worker without reconnecting', async () => {
    const fn = createFunction({ id: 'orders' }, async () => 'x');
    engine = await new FakeStreamEngine().start();
    const log = recorder();
    const w = await start({ functions: [fn], reconnectDelayMs: 50, logger: log.logger });
    engine.streams[0].send({ payload: { case: 'shutdown', value: { reason: 'stop', drainTimeoutMs: 25_000 } } });
    await waitFor(() => log.lines.includes('engine is shutting down; draining'), 'the shutdown');
    await w.stop();
    engine.streams[0].end();
    await expect(w.start()).rejects.toMatchObject({ code: 'WORKER_STOPPED' });
    expect(engine.streams).toHaveLength(1);
  });

  it("heartbeats at each registered answer's heartbeat_interval_ms unless heartbeatIntervalMs is set", async () => {
    const fn = createFunction({ id: 'orders' }, async () => 'x');
    engine = await new FakeStreamEngine((s) => s.send(registered(20))).start();
    const w = await start({ functions: [fn], heartbeatIntervalMs: undefined });
    expect((w as unknown as { heartbeatMs: number }).heartbeatMs).toBe(20);
    await waitFor(() => engine.streams[0].all('heartbeat').length >= 3, 'three heartbeats', 2_000);
    expect(engine.streams[0].all('heartbeat')[0]).toMatchObject({ workerId: w.workerId, activeJobs: 0 });
    await w.stop();

    const fixed = await start({ functions: [fn], heartbeatIntervalMs: 45_000 });
    expect((fixed as unknown as { heartbeatMs: number }).heartbeatMs).toBe(45_000);
  });

  it('reports a terminal over maxReportBytes as a PAYLOAD_TOO_LARGE failure with the same fence and no steps', async () => {
    const fn = createFunction({ id: 'orders' }, async ({ step }) => {
      await step.run('small', () => 1);
      return { big: 'z'.repeat(2_000) };
    });
    engine = await new FakeStreamEngine().start();
    await start({ functions: [fn], maxReportBytes: 1_000 });
    engine.streams[0].send(jobMessage('job-9', 4, 'tok-9'));
    const [failed] = await waitFor(() => engine.streams[0].all('jobFailed').length === 1 && engine.streams[0].all('jobFailed'), 'the failure');
    expect(engine.streams[0].all('jobCompleted')).toEqual([]);
    expect(failed).toMatchObject({ jobId: 'job-9', executionSeq: 4n, leaseToken: 'tok-9', steps: [], error: { code: 'PAYLOAD_TOO_LARGE', retryable: false } });
    const match = /^job_completed report of (\d+) bytes \(output 2010 bytes, 1 step\(s\) (\d+) bytes, largest "small" (\d+) bytes\) is over the stream's message limit of 1000 bytes$/.exec(failed.error!.message);
    expect(match).not.toBeNull();
    expect(Number(match![1])).toBeGreaterThan(2_010);
    expect(Number(match![1])).toBeLessThan(2_200); // the output travels once (JSON text), not also as a Struct
    expect(Number(match![2])).toBe(Number(match![3]) + 2);
  });

  it('sends each value once (as JSON text, no Struct twin), so outputs that fit maxReportBytes once complete', async () => {
    const fn = createFunction({ id: 'orders' }, async ({ step }) => {
      const text = await step.run('text', () => 's'.repeat(1_700));
      return { length: text.length, blob: 'r'.repeat(1_000) };
    });
    engine = await new FakeStreamEngine().start();
    await start({ functions: [fn], maxReportBytes: 3_000 });
    engine.streams[0].send(jobMessage('job-10', 2, 'tok-10'));
    const [completed] = await waitFor(() => engine.streams[0].all('jobCompleted').length === 1 && engine.streams[0].all('jobCompleted'), 'the completion');
    expect(engine.streams[0].all('jobFailed')).toEqual([]);
    expect(completed.output).toBeUndefined();
    expect(JSON.parse(completed.outputJson)).toEqual({ length: 1_700, blob: 'r'.repeat(1_000) });
    expect(completed.steps.map((s) => [s.name, s.output, s.outputJson])).toEqual([['text', undefined, JSON.stringify('s'.repeat(1_700))]]);
  });

  it('after the engine ends a stream with resource_exhausted for a report, reconnects and reports that job PAYLOAD_TOO_LARGE', async () => {
    const fn = createFunction({ id: 'orders' }, async () => ({ big: 'q'.repeat(3_000) }));
    engine = await new FakeStreamEngine(undefined, { 'grpc.max_receive_message_length': 2_048 }).start();
    const w = await start({ functions: [fn] });
    expect((w as unknown as { maxReportBytes: number }).maxReportBytes).toBe(DEFAULT_MAX_REPORT_BYTES);
    engine.streams[0].send(jobMessage('job-5', 6, 'tok-5'));
    await waitFor(() => engine.streams.length === 2 && engine.streams[1].all('jobFailed').length === 1, 'the failure on a new stream', 3_000);
    const [failed] = engine.streams[1].all('jobFailed');
    expect(failed).toMatchObject({ jobId: 'job-5', executionSeq: 6n, leaseToken: 'tok-5', steps: [], error: { code: 'PAYLOAD_TOO_LARGE', retryable: false } });
    expect(failed.error!.message).toMatch(/^job_completed report of \d+ bytes \(output 3010 bytes\) is over the engine's message limit of 2048 bytes$/);
    expect((w as unknown as { maxReportBytes: number }).maxReportBytes).toBe(2_048);
  });

  it('accepts a job assignment over grpc-js\'s 4 MiB default (the engine sends up to 64 MiB) and runs it', async () => {
    const fn = createFunction({ id: 'orders' }, async ({ event }) => ({ length: (event.data as { blob: string }).blob.length }));
    engine = await new FakeStreamEngine().start();
    await start({ functions: [fn] });
    const blob = 'b'.repeat(5 * 1024 * 1024);
    const job = jobMessage('job-big', 1, 'tok-big');
    (job.payload!.value as { eventDataJson: string }).eventDataJson = JSON.stringify({ blob });
    engine.streams[0].send(job);
    const [completed] = await waitFor(() => engine.streams[0].all('jobCompleted').length === 1 && engine.streams[0].all('jobCompleted'), 'the big job to complete', 5_000);
    expect(completed).toMatchObject({ jobId: 'job-big', outputJson: JSON.stringify({ length: blob.length }) });
    expect(engine.streams).toHaveLength(1);
  });

  it('start() rejects when the engine refuses the register as invalid (invalid_argument before registered), without reconnecting', async () => {
    engine = await new FakeStreamEngine((stream) => stream.end({ code: grpc.status.INVALID_ARGUMENT, details: 'register: worker id "bad id": letters, digits' })).start();
    const fn = createFunction({ id: 'orders' }, async () => 'x');
    worker = createStreamWorker({ serverUrl: engine.url, registerFunctions: false, reconnectDelayMs: 20, logger: recorder().logger, functions: [fn] });
    const failure = await worker.start().then(() => undefined, (err: unknown) => err);
    expect(failure).toMatchObject({ name: 'IronflowClientError', code: 'invalid_argument', status: 400 });
    expect((failure as Error).message).toContain('worker id "bad id"');
    await worker.stop(); // returns once its loop ended: a refused worker never opens another stream
    expect(engine.streams).toHaveLength(1);
  });

  it('reads the limit from Connect and gRPC resource_exhausted details', () => {
    expect(messageLimitOf('message size 5242999 is larger than configured readMaxBytes 4194304')).toBe(4_194_304);
    expect(messageLimitOf('message size is larger than configured readMaxBytes 1024')).toBe(1_024);
    expect(messageLimitOf('Received message larger than max (3050 vs. 2048)')).toBe(2_048);
    expect(messageLimitOf('resource exhausted')).toBeUndefined();
  });
});
