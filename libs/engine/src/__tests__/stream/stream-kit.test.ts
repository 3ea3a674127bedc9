/**
 * Plumbing for the worker-stream tests (not a test suite: jest runs `*.spec.ts` only, and the
 * build excludes `*.test.ts`): a real server (`startServer`, all five services) on its
 * own SQLite file or PostgreSQL database, a raw `@grpc/grpc-js` client that speaks
 * `WorkerService.Connect` the way the v0.29 worker does (messages built by hand from the
 * generated schema, nothing from `libs/sdk`). Lease recovery is left to the real capacity
 * scanner: a test moves the store clock past a lease and waits for the scanner's count.
 */
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { CallScope, RunView } from '@ironflow/contracts';
import { v1 } from '@ironflow/rpc';
import { IronflowSettings, RunningServer } from '@ironflow/services';
import { Dialect, StoreClock } from '@ironflow/store';
import { BusNamespace } from '@ironflow/bus';
import { dropNamespaceStreams, startTestServer, waitFor } from '@ironflow/testing';

export const SCOPE: CallScope = { project: 'default', env: 'default' };

export interface StreamEngine {
  server: RunningServer;
  /** The store's URL (`sqlite:<file>` or a PostgreSQL database of its own). */
  databaseUrl: string;
  url: string;
  port: number;
  /** The store clock: `advance(ms)` moves every lease, sleep and backoff deadline at once. */
  clock: StoreClock;
  /** Current value of `ironflow_capacity_stale_mutations_rejected_total`. */
  staleRejected(): Promise<number>;
  /** Current value of `ironflow_lease_recoveries_total{effect}` (the capacity scanner's count). */
  leaseRecoveries(effect: 'requeued' | 'exhausted' | 'released'): Promise<number>;
  getRun(runId: string): Promise<RunView>;
  waitForRun(runId: string, accept: (run: RunView) => boolean, what: string, timeoutMs?: number): Promise<RunView>;
  /** Registers a pull function triggered by `event`. */
  registerPullFunction(id: string, event?: string, retry?: { maxAttempts: number }): Promise<void>;
  /** Emits `event` and answers the id of the run it started. */
  trigger(event: string, data?: unknown): Promise<string>;
  close(): Promise<void>;
}

/**
 * Starts the engine with short intervals (dispatch poll and tick 50 ms) on a fresh store of
 * `dialect`; `settings` overrides. `nats: true` puts it on the test NATS (IRONFLOW_TEST_NATS_URL)
 * in a deployment namespace of its own (`IRONFLOW_CLUSTER_ID` `stream-…`), whose streams `close()`
 * deletes; otherwise the bus is in-process.
 */
export async function startStreamEngine(dialect: Dialect, settings: Partial<IronflowSettings> = {}, options: { nats?: boolean } = {}): Promise<StreamEngine> {
  const namespace = options.nats ? new BusNamespace(uid('stream')) : undefined;
  const onNats = namespace ? { natsUrl: natsUrl(), clusterId: namespace.clusterId } : {};
  const { server, databaseUrl, close: closeServer } = await startTestServer(dialect, 'ironflow_stream', { ...onNats, ...settings });
  const close = async () => {
    await closeServer();
    if (namespace) await dropNamespaceStreams(namespace);
  };
  const engine = server.runtime.engine;
  const getRun = (runId: string) => engine.api.getRun(SCOPE, runId);
  return {
    server,
    databaseUrl,
    url: server.url,
    port: server.port,
    clock: engine.resources.clock as StoreClock,
    staleRejected: async () => (await engine.resources.metrics.staleMutationsRejected.get()).values[0]?.value ?? 0,
    leaseRecoveries: async (effect) => (await engine.resources.metrics.leaseRecoveries.get()).values.find((v) => v.labels.effect === effect)?.value ?? 0,
    getRun,
    waitForRun: (runId, accept, what, timeoutMs = 10_000) => waitFor(what, async () => {
      const run = await getRun(runId);
      return accept(run) ? run : undefined;
    }, timeoutMs),
    registerPullFunction: async (id, event, retry) => {
      await engine.api.registerFunction(SCOPE, { id, mode: 'pull', triggers: event ? [{ event }] : [], ...(retry ? { retry: { maxAttempts: retry.maxAttempts, initialDelayMs: 10, backoffFactor: 1, maxDelayMs: 10 } } : {}) });
    },
    trigger: async (event, data = {}) => {
      const out = await engine.api.trigger(SCOPE, { event, data });
      if (out.runIds.length !== 1) throw new Error(`event ${event} started ${out.runIds.length} runs`);
      return out.runIds[0];
    },
    close,
  };
}


/** `expires_at` of a run's lease (ms on the store clock), or undefined without one. */
export async function leaseExpiry(engine: StreamEngine, runId: string): Promise<{ executionSeq: number; expiresAt: number } | undefined> {
  const rows = await engine.server.runtime.store.read('testLease', (tx) =>
    tx.query<{ execution_seq: unknown; expires_at: unknown }>(`SELECT execution_seq, expires_at FROM leases WHERE run_id = $1`, [runId]),
  );
  return rows[0] ? { executionSeq: Number(rows[0].execution_seq), expiresAt: Number(rows[0].expires_at) } : undefined;
}

type EngineCase = NonNullable<v1.EngineMessage['payload']['case']>;
type EnginePayload<K extends EngineCase> = Extract<v1.EngineMessage['payload'], { case: K }>['value'];

/**
 * A worker stream opened with a raw `@grpc/grpc-js` bidi call (gRPC over h2c on the engine's one
 * port). Every engine message is recorded; `next(kind)` takes the next unread one of a kind.
 */
export class RawStreamWorker {
  readonly received: v1.EngineMessage[] = [];
  private readonly consumed = new Set<number>();
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<v1.WorkerMessage, v1.EngineMessage>;
  status?: grpc.StatusObject;

  constructor(port: number, metadata = new grpc.Metadata()) {
    this.client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    this.call = this.client.makeBidiStreamRequest(
      `/${v1.WorkerService.typeName}/Connect`,
      (m: v1.WorkerMessage) => Buffer.from(toBinary(v1.WorkerMessageSchema, m)),
      (b: Buffer) => fromBinary(v1.EngineMessageSchema, b),
      metadata,
    );
    this.call.on('data', (m: v1.EngineMessage) => this.received.push(m));
    this.call.on('status', (s: grpc.StatusObject) => (this.status = s));
    this.call.on('error', () => undefined);
  }

  send(init: MessageInitShape<typeof v1.WorkerMessageSchema>): void {
    this.call.write(create(v1.WorkerMessageSchema, init));
  }

  /** The v0.29 `register`: all six fields. */
  register(workerId: string, functionIds: string[], maxConcurrentJobs: number): void {
    this.send({
      payload: {
        case: 'register',
        value: { workerId, hostname: 'test-host', functionIds, maxConcurrentJobs, labels: {}, version: { sdk: '0.29.0', runtime: `node-${process.version}` } },
      },
    });
  }

  /** Waits for the next unread message of `kind` (matching `accept`, if given) and marks it read. */
  async next<K extends EngineCase>(kind: K, accept: (value: EnginePayload<K>) => boolean = () => true, timeoutMs = 10_000): Promise<EnginePayload<K>> {
    const take = (): object | undefined => {
      for (const [i, m] of this.received.entries()) {
        if (this.consumed.has(i) || m.payload.case !== kind) continue;
        const value = m.payload.value as unknown as EnginePayload<K>;
        if (!accept(value)) continue;
        this.consumed.add(i);
        return value;
      }
      return undefined;
    };
    return (await waitFor(`engine message ${kind}`, take, timeoutMs)) as EnginePayload<K>;
  }

  /** Unread messages of `kind`. */
  unread(kind: EngineCase): v1.EngineMessage[] {
    return this.received.filter((m, i) => !this.consumed.has(i) && m.payload.case === kind);
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

function natsUrl(): string {
  const url = process.env.IRONFLOW_TEST_NATS_URL;
  if (!url) throw new Error('IRONFLOW_TEST_NATS_URL is not set (see libs/testing/src/global-setup.ts)');
  return url;
}

/** A unique id usable as a function id, event name or worker id. */
export function uid(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** An async iterable fed by `push`, ended by `close()`: a client's request stream that stays open. */
export class Pushable<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private ended = false;
  private wake?: () => void;

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  close(): void {
    this.ended = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      while (this.items.length > 0) yield this.items.shift() as T;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}
