/**
 * Plumbing for the worker-stream tests (not a test suite: jest runs `*.spec.ts` only, and the
 * build excludes `*.test.ts`): a real server (`startServer`, all five services) on its
 * own SQLite file or PostgreSQL database, a raw `@grpc/grpc-js` client that speaks
 * `WorkerService.Connect` the way the v0.29 worker does (messages built by hand from the
 * generated schema, nothing from `libs/sdk`), and the lease-recovery transaction the capacity
 * scanner performs, done directly so a test decides when it happens.
 */
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { CallScope, RunView } from '@ironflow/contracts';
import { v1 } from '@ironflow/rpc';
import { IronflowSettings, RunningServer } from '@ironflow/services';
import { Dialect, StoreClock } from '@ironflow/store';
import { startTestServer, waitFor } from '@ironflow/testing';

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
  getRun(runId: string): Promise<RunView>;
  waitForRun(runId: string, accept: (run: RunView) => boolean, what: string, timeoutMs?: number): Promise<RunView>;
  /** Registers a pull function triggered by `event`. */
  registerPullFunction(id: string, event?: string, retry?: { maxAttempts: number }): Promise<void>;
  /** Emits `event` and answers the id of the run it started. */
  trigger(event: string, data?: unknown): Promise<string>;
  close(): Promise<void>;
}

/** Starts the engine with short intervals (dispatch poll and tick 50 ms) on a fresh store of `dialect`; `settings` overrides. */
export async function startStreamEngine(dialect: Dialect, settings: Partial<IronflowSettings> = {}): Promise<StreamEngine> {
  const { server, databaseUrl, close } = await startTestServer(dialect, 'ironflow_stream', settings);
  const engine = server.runtime.engine;
  const getRun = (runId: string) => engine.api.getRun(SCOPE, runId);
  return {
    server,
    databaseUrl,
    url: server.url,
    port: server.port,
    clock: engine.resources.clock as StoreClock,
    staleRejected: async () => (await engine.resources.metrics.staleMutationsRejected.get()).values[0]?.value ?? 0,
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


/**
 * What the capacity scanner does to an execution whose lease expired (DESIGN.md
 * `capacity-scanner`), as one unit of work: the run goes back to `waiting_for_capacity` with its
 * lease token cleared and `recoveries + 1`, and the lease row is deleted — only while that
 * execution is still the live one. Answers whether this call requeued it (the real scanner may
 * have done it first once the clock is past the lease; the effect is the same).
 */
export async function recoverLease(engine: StreamEngine, runId: string, executionSeq: number): Promise<boolean> {
  const store = engine.server.runtime.store;
  return store.unitOfWork('testRecoverLease', async (tx) => {
    const r = await tx.execute(
      `UPDATE runs SET status = 'waiting_for_capacity', lease_token = NULL, recoveries = recoveries + 1,
         available_at = $2, version = version + 1, updated_at = $2
       WHERE id = $1 AND status = 'running' AND execution_seq = $3`,
      [runId, tx.now, executionSeq],
    );
    await tx.execute(`DELETE FROM leases WHERE run_id = $1 AND execution_seq = $2`, [runId, executionSeq]);
    return r.affected === 1;
  });
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
