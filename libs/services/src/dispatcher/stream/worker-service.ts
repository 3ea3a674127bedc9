/**
 * `ironflow.v1.WorkerService/Connect` (WIRE-PROTOCOL.md section 4): the bidirectional worker stream
 * on the dispatcher's HTTP/2 side. ConnectRPC's Node adapter serves it over the Connect protocol
 * (binary protobuf, what the Ironflow SDK's streaming worker speaks) and gRPC (what our SDK's
 * `createStreamWorker` speaks, via `@grpc/grpc-js`) from the same router.
 *
 * A thin edge: it parses messages and hands each to the engine's `StreamConnection`, one at a
 * time in arrival order; everything the engine decides to send goes out in order.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import type { ConnectRouter, HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { Code, ConnectError } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { type CallScope, DEFAULT_MAX_PAYLOAD_BYTES } from '@ironflow/contracts';
import type { StreamConnection, StreamWorkerSystem } from '@ironflow/engine';
import type { EngineLogger } from '@ironflow/observability';
import { type Authenticate, authInterceptor, callScope, openAuthentication, toConnectError, v1 } from '@ironflow/rpc';
import { AsyncQueue } from './async-queue';
import { EngineMessageInit, fenceOf, fromHeartbeat, fromJobCompleted, fromJobFailed, fromJobYielded, fromRegister, toEngineMessage } from './stream-mapping';

export interface WorkerServiceOptions {
  /** Where protocol problems are logged; default silent. */
  logger?: EngineLogger;
}

/**
 * The `WorkerService` implementation over `streams`. Its scope is the one the router's
 * `authInterceptor` gave the call (a stream without a valid key, when keys are required, ends
 * with `unauthenticated` before its first message is read). Stream errors (ended with a Connect
 * error): `invalid_argument` when the first message is not `register` or the registration is
 * invalid; `permission_denied` when its `labels.env` is not its key's env; `deadline_exceeded`
 * when the engine ends a stream that stayed silent past the heartbeat timeout. A stream that ends
 * forgets its jobs and gives them back (released to the queue at once), except when the engine is
 * shutting down or ended it over a message too large to read (`resource_exhausted`): then their
 * leases are kept.
 */
export function createWorkerServiceImpl(streams: StreamWorkerSystem, options: WorkerServiceOptions = {}): ServiceImpl<typeof v1.WorkerService> {
  return {
    connect: (requests: AsyncIterable<v1.WorkerMessage>, context: HandlerContext) =>
      serveStream(streams, callScope(context), requests, context.signal, options.logger),
  };
}

/** `(router) => router.service(WorkerService, impl)`, for `createRpcHandlers(..., { routes })`. */
export function workerServiceRoutes(streams: StreamWorkerSystem, options: WorkerServiceOptions = {}): (router: ConnectRouter) => void {
  const impl = createWorkerServiceImpl(streams, options);
  return (router) => {
    router.service(v1.WorkerService, impl);
  };
}

/**
 * An HTTP/2 handler serving only `WorkerService` (a dispatcher process without the api-gateway),
 * every call checked by `authenticate` (default: open); unknown paths → 404. Messages are capped
 * at `maxBodyBytes` (default 4 MiB).
 */
export function workerServiceHttp2Handler(streams: StreamWorkerSystem, options: WorkerServiceOptions & { maxBodyBytes?: number; authenticate?: Authenticate } = {}) {
  return connectNodeAdapter({
    routes: workerServiceRoutes(streams, options),
    interceptors: [authInterceptor(options.authenticate ?? openAuthentication)],
    readMaxBytes: options.maxBodyBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
  });
}

async function* serveStream(
  streams: StreamWorkerSystem,
  scope: CallScope,
  requests: AsyncIterable<v1.WorkerMessage>,
  signal: AbortSignal,
  logger: EngineLogger | undefined,
): AsyncGenerator<EngineMessageInit> {
  const out = new AsyncQueue<EngineMessageInit>();
  let conn: StreamConnection | undefined;
  // A stream ended over a message too large to read keeps its jobs' leases: releasing them would
  // run the job again and again; the worker reports it failed (PAYLOAD_TOO_LARGE) on its next stream.
  let release = true;
  const onAbort = () => out.close();
  signal.addEventListener('abort', onAbort);
  const reader = (async () => {
    try {
      const incoming = requests[Symbol.asyncIterator]();
      const first = await incoming.next();
      if (first.done) return out.close();
      if (first.value.payload.case !== 'register') throw new ConnectError('the first message of a worker stream must be `register`', Code.InvalidArgument);
      conn = await streams.open(scope, fromRegister(first.value.payload.value), {
        send: (message) => out.push(toEngineMessage(message)),
        encodedBytes: (message) => toBinary(v1.EngineMessageSchema, create(v1.EngineMessageSchema, toEngineMessage(message))).byteLength,
        end: (reason) => out.fail(new ConnectError(reason, Code.DeadlineExceeded)),
      });
      for (;;) {
        const next = await incoming.next();
        if (next.done || conn.closed) break;
        await handle(conn, next.value, logger);
      }
      out.close();
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.ResourceExhausted) release = false;
      if (!signal.aborted) out.fail(toConnectError(err));
    } finally {
      conn?.close(release);
    }
  })();
  try {
    yield* out;
  } finally {
    signal.removeEventListener('abort', onAbort);
    out.close();
    conn?.close(release);
    void reader;
  }
}

/** One worker message (4.2). Messages the v0.29 SDK never sends (`step_*`) and repeats of `register` are ignored. */
async function handle(conn: StreamConnection, message: v1.WorkerMessage, logger: EngineLogger | undefined): Promise<void> {
  const { payload } = message;
  switch (payload.case) {
    case 'heartbeat':
      await conn.heartbeat(fromHeartbeat(payload.value));
      return;
    case 'jobAck':
      conn.ack(payload.value.jobId);
      return;
    case 'jobCompleted':
      await conn.report(payload.value.jobId, fenceOf(payload.value), fromJobCompleted(payload.value));
      return;
    case 'jobFailed':
      await conn.report(payload.value.jobId, fenceOf(payload.value), fromJobFailed(payload.value));
      return;
    case 'jobYielded':
      await conn.report(payload.value.jobId, fenceOf(payload.value), fromJobYielded(payload.value));
      return;
    case 'register':
    case 'stepStarted':
    case 'stepCompleted':
    case 'stepFailed':
    case 'stepYielded':
    case undefined:
      logger?.log('worker stream message ignored', { worker_id: conn.workerId, message: payload.case ?? 'unknown' });
      return;
  }
}
