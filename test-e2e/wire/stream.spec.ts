/**
 * Golden wire tests: the worker stream (WIRE-PROTOCOL.md section 4) as the v0.29 streaming worker
 * speaks it — the Connect protocol over cleartext HTTP/2, `application/connect+proto`, each
 * message framed by hand (1 flag byte + 4-byte big-endian length + protobuf bytes) on a raw
 * `node:http2` request. Messages are built and read with the generated `ironflow.v1` schema only;
 * nothing comes from `libs/sdk`.
 */
import { connect as h2connect, ClientHttp2Session, ClientHttp2Stream } from 'node:http2';
import { create, fromBinary, MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { v1 } from '@ironflow/rpc';
import { connect, isoIn, startWireEngine, uid, waitFor, waitForRun, WIRE_STORES, WireEngine } from '../support/wire-harness';

/** One `WorkerService/Connect` stream with raw Connect framing. */
class RawConnectStream {
  readonly received: v1.EngineMessage[] = [];
  private buffer = Buffer.alloc(0);
  private readonly session: ClientHttp2Session;
  private readonly stream: ClientHttp2Stream;
  status?: number;
  contentType?: string;
  /** The end-of-stream message, once received. */
  end?: { error?: { code: string; message: string } };

  constructor(base: string) {
    this.session = h2connect(base);
    this.session.on('error', () => undefined);
    this.stream = this.session.request({
      ':method': 'POST',
      ':path': `/${v1.WorkerService.typeName}/Connect`,
      'content-type': 'application/connect+proto',
      'connect-protocol-version': '1',
    });
    this.stream.on('response', (headers) => {
      this.status = Number(headers[':status']);
      this.contentType = String(headers['content-type']);
    });
    this.stream.on('data', (chunk: Buffer) => this.onData(chunk));
    this.stream.on('error', () => undefined);
  }

  private onData(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    while (this.buffer.length >= 5) {
      const flags = this.buffer[0];
      const length = this.buffer.readUInt32BE(1);
      if (this.buffer.length < 5 + length) return;
      const payload = this.buffer.subarray(5, 5 + length);
      this.buffer = this.buffer.subarray(5 + length);
      if (flags & 0x02) {
        // End-of-stream: JSON `{"error"?: {code, message}}`.
        this.end = JSON.parse(payload.toString('utf8') || '{}');
        continue;
      }
      this.received.push(fromBinary(v1.EngineMessageSchema, payload));
    }
  }

  send(init: MessageInitShape<typeof v1.WorkerMessageSchema>): void {
    const bytes = toBinary(v1.WorkerMessageSchema, create(v1.WorkerMessageSchema, init));
    const head = Buffer.alloc(5);
    head.writeUInt32BE(bytes.length, 1);
    this.stream.write(Buffer.concat([head, Buffer.from(bytes)]));
  }

  /** The `n`-th (0-based) job assignment this stream received. */
  job(n: number): Promise<v1.JobAssignment> {
    return waitFor(`job assignment ${n}`, async () => {
      const jobs = this.received.filter((m) => m.payload.case === 'job');
      return jobs.length > n ? (jobs[n].payload.value as v1.JobAssignment) : undefined;
    });
  }

  close(): void {
    this.stream.close();
    this.session.close();
  }
}

describe.each(WIRE_STORES)('wire: worker stream, Connect protocol (%s)', (store) => {
  let engine: WireEngine;

  beforeAll(async () => {
    engine = await startWireEngine(store);
  });

  afterAll(async () => {
    await engine?.close();
  });

  async function newStream(): Promise<{ fnId: string; event: string; stream: RawConnectStream }> {
    const fnId = uid('stream-fn');
    const event = uid('stream.event');
    expect((await connect(engine.url, 'RegisterFunction', { id: fnId, preferredMode: 'EXECUTION_MODE_PULL', triggers: [{ event }] })).status).toBe(200);
    const stream = new RawConnectStream(engine.url);
    stream.send({ payload: { case: 'register', value: { workerId: uid('worker-stream'), hostname: 'h', functionIds: [fnId], maxConcurrentJobs: 10, labels: {}, version: { sdk: '0.29.0', runtime: 'node' } } } });
    await waitFor('registered', async () => stream.received.some((m) => m.payload.case === 'registered'));
    expect(stream.status).toBe(200);
    expect(stream.contentType).toBe('application/connect+proto');
    return { fnId, event, stream };
  }

  it('JobAssignment.event carries the emitted event\'s metadata (field 7) and version (field 8)', async () => {
    const { event, stream } = await newStream();
    try {
      const emitted = await connect(engine.url, 'Trigger', { event, data: { n: 1 }, version: 2, metadata: { src: 'x' } });
      expect(emitted.status).toBe(200);
      const job = await stream.job(0);
      expect(job.event?.id).toBe(emitted.json.eventId);
      expect(job.event?.version).toBe(2);
      expect(job.event?.metadata).toEqual({ src: 'x' });
      expect(job.event?.data).toEqual({ n: 1 });
      stream.send({ payload: { case: 'jobAck', value: { jobId: job.jobId, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
      stream.send({ payload: { case: 'jobCompleted', value: { jobId: job.jobId, output: { ok: true }, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
      await waitForRun(engine.url, job.runId, (r) => r.status === 'completed');

      await connect(engine.url, 'Trigger', { event, data: {} });
      const plain = await stream.job(1);
      expect(plain.event?.version).toBe(1);
      expect(plain.event?.metadata).toBeUndefined();
    } finally {
      stream.close();
    }
  });

  it('a finished sleep comes back as a CompletedStep with no `output` Struct and `output_json` "null" (the REST row\'s "output": null)', async () => {
    const { event, stream } = await newStream();
    try {
      const { json } = await connect(engine.url, 'Trigger', { event, data: {} });
      const runId = json.runIds[0];
      const first = await stream.job(0);
      const fence = { executionSeq: first.executionSeq, leaseToken: first.leaseToken };
      stream.send({ payload: { case: 'jobAck', value: { jobId: first.jobId, ...fence } } });
      // Ours (field 100): the yield the v0.29 worker cannot send, with the step run before it.
      stream.send({
        payload: {
          case: 'jobYielded',
          value: {
            jobId: first.jobId,
            ...fence,
            yieldJson: JSON.stringify({ type: 'sleep', step_id: `${runId}:nap:0`, until: isoIn(50) }),
            steps: [{ id: `${runId}:a:0`, name: 'a', type: 'invoke', status: 'completed', output: { x: 1 }, outputJson: '{"x":1}' }],
          },
        },
      });
      const second = await stream.job(1);
      expect(second.runId).toBe(runId);
      expect(second.completedSteps.map((s) => ({ stepId: s.stepId, name: s.name, output: s.output, outputJson: s.outputJson }))).toEqual([
        { stepId: `${runId}:a:0`, name: 'a', output: { x: 1 }, outputJson: '{"x":1}' },
        { stepId: `${runId}:nap:0`, name: 'nap', output: undefined, outputJson: 'null' },
      ]);
    } finally {
      stream.close();
    }
  });

  it('a register whose worker id holds U+0000 ends the stream with invalid_argument (VALIDATION_ERROR), on every store', async () => {
    const stream = new RawConnectStream(engine.url);
    try {
      stream.send({ payload: { case: 'register', value: { workerId: 'w\u0000x', hostname: 'h', functionIds: [], maxConcurrentJobs: 1, labels: {} } } });
      const end = await waitFor('end of stream', async () => stream.end);
      expect(end.error?.code).toBe('invalid_argument');
      expect(end.error?.message).toContain('worker id');
      expect(stream.received.some((m) => m.payload.case === 'registered')).toBe(false);
    } finally {
      stream.close();
    }
  });
});
