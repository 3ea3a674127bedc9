import { WakeableSleeps } from './wakeable-sleeps';
import * as grpc from '@grpc/grpc-js';
import { IronflowClientError, IronflowError, errorMessage } from './errors';
import { executeInvocation } from './execute';
import { IronflowFunction, indexFunctions } from './function';
import { baseHeaders, connectUnary } from './http';
import { REGISTER_FUNCTION_PROCEDURE, workerRegistrationBody } from './register-function';
import { SDK_VERSION, resolveApiKey, resolveEnvironment, resolveServerUrl } from './settings';
import {
  CONNECT_METHOD_PATH,
  WorkerMessageInit,
  deserializeEngineMessage,
  eventOf,
  jsonText,
  memoOf,
  serializeWorkerMessage,
  timestampFromDate,
  toExecutedStep,
  toStruct,
  toWireError,
  workerMessage,
  yieldJson,
} from './stream-codec';
import { EngineMessage, JobAssignment, WorkerMessage } from '@ironflow/contracts/proto';
import { LeaseState } from '@ironflow/contracts/proto';
import type { Worker, WorkerLogger } from './worker';

/**
 * Options of {@link createStreamWorker}. Durations are in ms.
 * - `serverUrl`: default env `IRONFLOW_SERVER_URL`, else `http://localhost:9123`. `http://` →
 *   cleartext HTTP/2 (h2c, prior knowledge) on the same port as REST; `https://` → TLS.
 * - `apiKey`: sent as `authorization: Bearer <key>` metadata; default env `IRONFLOW_API_KEY`.
 * - `functions`: the functions this worker runs (ids unique).
 * - `maxConcurrentJobs`: default 10.
 * - `environment`: `x-ironflow-environment` metadata; default env `IRONFLOW_ENV`, else `"default"`.
 * - `labels`: reported at registration; default `{}`.
 * - `heartbeatIntervalMs`: default the engine's `registered.heartbeat_interval_ms` (30000).
 * - `reconnectDelayMs`: wait after a failed connection or registration; default 5000. After a
 *   clean stream end the worker reconnects at once (unless the stream lasted under 1 s).
 * - `registerFunctions`: call `RegisterFunction` (Connect JSON over HTTP/1.1, as the REST worker
 *   does) for each function before each connection; default true. The v0.29 streaming worker
 *   does not, so its functions must exist already.
 * - `requestTimeoutMs`: deadline of each `RegisterFunction` call; default 30000.
 * - `logger`: default logs warnings and errors to the console.
 */
export interface StreamWorkerOptions {
  serverUrl?: string;
  apiKey?: string;
  functions: readonly IronflowFunction<any, any>[];
  maxConcurrentJobs?: number;
  environment?: string;
  labels?: Record<string, string>;
  heartbeatIntervalMs?: number;
  reconnectDelayMs?: number;
  registerFunctions?: boolean;
  requestTimeoutMs?: number;
  logger?: WorkerLogger;
}

/**
 * A pull worker over the `ironflow.v1.WorkerService/Connect` stream. Same lifecycle as the REST
 * {@link Worker}: `start()` resolves once the engine answered `registered` (retrying every
 * `reconnectDelayMs` while unreachable) and rejects with {@link IronflowClientError} when the
 * engine refuses the credentials (`unauthenticated` / `permission_denied`); `stop()` ends the
 * stream and aborts running handlers (no report for them); `drain()` takes no new jobs, waits for
 * the running ones to report, then stops. The engine's `shutdown` starts `drain()`.
 */
export type StreamWorker = Worker;

type State = 'idle' | 'connecting' | 'connected' | 'draining' | 'stopped';

interface ActiveJob {
  jobId: string;
  runId: string;
  executionSeq: bigint;
  leaseToken: string;
  startedAt: Date;
  abort: AbortController;
  /** The engine cancelled it (or answered its lease stale): no failure report, not listed in heartbeats. */
  cancelled: boolean;
}

const defaultLogger: WorkerLogger = {
  warn: (message, fields) => console.warn(`[ironflow stream worker] ${message}`, fields ?? ''),
  error: (message, fields) => console.error(`[ironflow stream worker] ${message}`, fields ?? ''),
};

function newWorkerId(): string {
  let suffix = '';
  while (suffix.length < 6) suffix += Math.floor(Math.random() * 36).toString(36);
  return `worker-stream-${Date.now().toString(36)}-${suffix}`;
}

const REFUSED = new Set<number>([grpc.status.UNAUTHENTICATED, grpc.status.PERMISSION_DENIED]);

/** `http://host:port` → gRPC target `host:port` and credentials (h2c or TLS). */
function grpcTarget(serverUrl: string): { target: string; credentials: grpc.ChannelCredentials } {
  const url = new URL(serverUrl);
  const tls = url.protocol === 'https:';
  const port = url.port || (tls ? '443' : '80');
  return { target: `${url.hostname}:${port}`, credentials: tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure() };
}

class GrpcStreamWorker implements StreamWorker {
  readonly workerId = newWorkerId();
  private state: State = 'idle';
  private readonly functions: Map<string, IronflowFunction<any, any>>;
  private readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  private readonly environment: string;
  private readonly httpHeaders: Record<string, string>;
  private readonly maxJobs: number;
  private readonly labels: Record<string, string>;
  private readonly reconnectMs: number;
  private readonly timeoutMs: number;
  private readonly registerFunctions: boolean;
  private readonly log: WorkerLogger;
  private heartbeatMs: number | undefined;

  private client?: grpc.Client;
  private call?: grpc.ClientDuplexStream<WorkerMessage, EngineMessage>;
  private readonly active = new Map<string, ActiveJob>();
  private readonly idleWaiters: (() => void)[] = [];
  private readonly sleeps = new WakeableSleeps();
  private heartbeatTimer?: NodeJS.Timeout;
  private loop?: Promise<void>;
  private startPromise?: Promise<void>;
  private settleStart?: { resolve: () => void; reject: (err: unknown) => void };

  constructor(options: StreamWorkerOptions) {
    this.functions = indexFunctions(options.functions);
    this.baseUrl = resolveServerUrl(options.serverUrl);
    this.apiKey = resolveApiKey(options.apiKey);
    this.environment = resolveEnvironment(options.environment);
    this.httpHeaders = baseHeaders(this.apiKey, this.environment);
    this.maxJobs = options.maxConcurrentJobs ?? 10;
    if (!(Number.isInteger(this.maxJobs) && this.maxJobs >= 1)) throw new IronflowError('maxConcurrentJobs must be an integer >= 1', { code: 'VALIDATION_ERROR' });
    this.labels = { ...(options.labels ?? {}) };
    this.heartbeatMs = options.heartbeatIntervalMs;
    this.reconnectMs = options.reconnectDelayMs ?? 5_000;
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.registerFunctions = options.registerFunctions ?? true;
    this.log = options.logger ?? defaultLogger;
    grpcTarget(this.baseUrl); // throws a TypeError for a URL that does not parse
  }

  start(): Promise<void> {
    if (this.state === 'stopped') return Promise.reject(new IronflowError('worker is stopped', { code: 'WORKER_STOPPED' }));
    if (this.startPromise) return this.startPromise;
    this.startPromise = new Promise<void>((resolve, reject) => (this.settleStart = { resolve, reject }));
    this.state = 'connecting';
    const { target, credentials } = grpcTarget(this.baseUrl);
    this.client = new grpc.Client(target, credentials);
    this.loop = this.run();
    return this.startPromise;
  }

  async stop(): Promise<void> {
    if (this.state !== 'stopped') {
      this.state = 'stopped';
      this.stopHeartbeat();
      for (const job of this.active.values()) job.abort.abort();
      this.call?.cancel();
      this.sleeps.wakeAll();
      this.settleStart?.resolve();
    }
    await this.loop;
    this.client?.close();
  }

  async drain(): Promise<void> {
    if (this.state === 'stopped') return this.stop();
    if (this.state !== 'draining') this.state = 'draining';
    await this.whenIdle();
    await this.stop();
  }

  private get running(): boolean {
    return this.state === 'connecting' || this.state === 'connected' || this.state === 'draining';
  }

  /** Connect (register functions → open the stream → `register`), serve it, reconnect, until stopped or refused. */
  private async run(): Promise<void> {
    while (this.running) {
      if (this.state !== 'draining') this.state = 'connecting';
      if (this.registerFunctions) {
        try {
          for (const fn of this.functions.values()) {
            await connectUnary(this.baseUrl, REGISTER_FUNCTION_PROCEDURE, workerRegistrationBody(fn), { headers: this.httpHeaders, timeoutMs: this.timeoutMs });
          }
        } catch (err) {
          if (err instanceof IronflowClientError && (err.status === 401 || err.status === 403)) return this.refused(err);
          if (!this.running) break;
          this.log.warn('function registration failed; retrying', { worker_id: this.workerId, error: errorMessage(err), retry_in_ms: this.reconnectMs });
          await this.sleeps.sleep(this.reconnectMs);
          continue;
        }
      }
      if (!this.running) break;
      const opened = Date.now();
      const status = await this.serveOneStream();
      this.stopHeartbeat();
      this.call = undefined;
      if (!this.running) break;
      if (REFUSED.has(status.code)) {
        return this.refused(new IronflowClientError(`worker stream refused: ${status.details}`, status.code === grpc.status.UNAUTHENTICATED ? 'unauthenticated' : 'permission_denied', status.code === grpc.status.UNAUTHENTICATED ? 401 : 403));
      }
      const clean = status.code === grpc.status.OK;
      const delay = clean && Date.now() - opened >= 1_000 ? 0 : this.reconnectMs;
      this.log.warn('worker stream ended; reconnecting', { worker_id: this.workerId, code: status.code, details: status.details, retry_in_ms: delay });
      if (delay > 0) await this.sleeps.sleep(delay);
    }
  }

  private refused(err: IronflowClientError): void {
    this.log.error('engine refused the credentials; worker stops', { worker_id: this.workerId, error: err.message });
    this.settleStart?.reject(err);
    this.settleStart = undefined;
    this.state = 'stopped';
    this.stopHeartbeat();
    for (const job of this.active.values()) job.abort.abort();
  }

  /** One stream, from `register` to its end; resolves with its final status. */
  private serveOneStream(): Promise<{ code: number; details: string }> {
    const metadata = new grpc.Metadata();
    if (this.apiKey) metadata.set('authorization', `Bearer ${this.apiKey}`);
    metadata.set('x-ironflow-environment', this.environment);
    const call = this.client!.makeBidiStreamRequest(CONNECT_METHOD_PATH, serializeWorkerMessage, deserializeEngineMessage, metadata);
    this.call = call;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (code: number, details: string) => {
        if (settled) return;
        settled = true;
        resolve({ code, details });
      };
      call.on('data', (message: EngineMessage) => this.onMessage(message));
      call.on('error', (err: grpc.ServiceError) => finish(err.code ?? grpc.status.UNKNOWN, err.details ?? err.message));
      call.on('status', (status: grpc.StatusObject) => finish(status.code, status.details));
      this.write({
        payload: {
          case: 'register',
          value: {
            workerId: this.workerId,
            hostname: process.env.HOSTNAME || 'unknown',
            functionIds: [...this.functions.keys()],
            maxConcurrentJobs: this.maxJobs,
            labels: this.labels,
            version: { sdk: SDK_VERSION, runtime: `node-${process.version}` },
          },
        },
      });
    });
  }

  private write(init: WorkerMessageInit): boolean {
    const call = this.call;
    if (!call || call.destroyed || call.writableEnded) return false;
    try {
      call.write(workerMessage(init));
      return true;
    } catch (err) {
      this.log.warn('stream write failed', { worker_id: this.workerId, error: errorMessage(err) });
      return false;
    }
  }

  private onMessage(message: EngineMessage): void {
    const { payload } = message;
    switch (payload.case) {
      case 'registered':
        if (this.state === 'connecting') this.state = 'connected';
        this.heartbeatMs ??= payload.value.heartbeatIntervalMs > 0 ? payload.value.heartbeatIntervalMs : 30_000;
        this.startHeartbeat();
        this.settleStart?.resolve();
        return;
      case 'job':
        this.startJob(payload.value);
        return;
      case 'cancel':
        this.cancelJob(payload.value.jobId, payload.value.reason);
        return;
      case 'leaseRefresh':
        for (const segment of payload.value.segments) {
          if (segment.state !== LeaseState.STALE && segment.state !== LeaseState.UNKNOWN) continue;
          const job = [...this.active.values()].find((j) => j.runId === segment.runId && j.executionSeq === segment.executionSeq);
          if (job) this.cancelJob(job.jobId, `lease ${segment.state === LeaseState.STALE ? 'stale' : 'unknown'}`);
        }
        return;
      case 'shutdown':
        this.log.info?.('engine is shutting down; draining', { worker_id: this.workerId, reason: payload.value.reason });
        void this.drain();
        return;
      default:
        this.log.info?.('engine message ignored', { worker_id: this.workerId, message: payload.case ?? 'unknown' });
    }
  }

  private cancelJob(jobId: string, reason: string): void {
    const job = this.active.get(jobId);
    if (!job || job.cancelled) return;
    job.cancelled = true;
    job.abort.abort();
    this.log.info?.('job cancelled by the engine', { worker_id: this.workerId, job_id: jobId, reason });
  }

  /** A `job`: ack before any user code, then execute in the background. */
  private startJob(assignment: JobAssignment): void {
    const fields = { worker_id: this.workerId, job_id: assignment.jobId, run_id: assignment.runId };
    if (this.active.has(assignment.jobId) || this.active.size >= this.maxJobs || this.state !== 'connected') {
      this.log.warn('assignment not taken (running, at capacity or draining)', fields);
      return;
    }
    const job: ActiveJob = {
      jobId: assignment.jobId,
      runId: assignment.runId,
      executionSeq: assignment.executionSeq,
      leaseToken: assignment.leaseToken,
      startedAt: new Date(),
      abort: new AbortController(),
      cancelled: false,
    };
    this.active.set(job.jobId, job);
    this.write({ payload: { case: 'jobAck', value: { jobId: job.jobId, runId: job.runId, executionSeq: job.executionSeq, leaseToken: job.leaseToken } } });
    void this.runJob(job, assignment)
      .catch((err) => this.log.error('job crashed', { ...fields, error: errorMessage(err) }))
      .finally(() => {
        this.active.delete(job.jobId);
        if (this.active.size === 0) this.idleWaiters.splice(0).forEach((wake) => wake());
      });
  }

  /** Runs one invocation and sends exactly one of `job_completed`, `job_failed`, `job_yielded` (ours). */
  private async runJob(job: ActiveJob, assignment: JobAssignment): Promise<void> {
    const fence = { executionSeq: job.executionSeq, leaseToken: job.leaseToken };
    const started = Date.now();
    const fn = this.functions.get(assignment.functionId);
    if (!fn) {
      this.write({
        payload: {
          case: 'jobFailed',
          value: { jobId: job.jobId, ...fence, durationMs: 0, error: { message: `function "${assignment.functionId}" is not served by this worker`, code: 'FUNCTION_NOT_FOUND', retryable: false } },
        },
      });
      return;
    }
    const outcome = await executeInvocation({
      fn,
      runId: assignment.runId,
      attempt: assignment.attempt,
      event: eventOf(assignment),
      memo: memoOf(assignment),
      secrets: assignment.context?.secrets,
      // The stream's retryable rule for a plain Error thrown outside steps is push's (false), WIRE-PROTOCOL.md 1.8.
      transport: 'push',
      signal: job.abort.signal,
    });
    const durationMs = Date.now() - started;
    const steps = outcome.steps.map(toExecutedStep);
    if (outcome.status === 'completed') {
      // Sent even after a cancel or stop() (the handler finished); the engine drops it if stale.
      const output = toStruct(outcome.result);
      this.write({ payload: { case: 'jobCompleted', value: { jobId: job.jobId, ...fence, durationMs, ...(output ? { output } : {}), outputJson: jsonText(outcome.result), steps } } });
    } else if (job.abort.signal.aborted) {
      this.log.info?.('job aborted; no report', { worker_id: this.workerId, job_id: job.jobId });
    } else if (outcome.status === 'failed') {
      this.write({ payload: { case: 'jobFailed', value: { jobId: job.jobId, ...fence, durationMs, error: toWireError(outcome.error), steps } } });
    } else {
      this.write({ payload: { case: 'jobYielded', value: { jobId: job.jobId, ...fence, durationMs, yieldJson: yieldJson(outcome.yield), steps } } });
    }
  }

  private startHeartbeat(): void {
    if (this.heartbeatTimer || !this.heartbeatMs || this.heartbeatMs <= 0) return;
    this.heartbeatTimer = setInterval(() => this.heartbeat(), this.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  private stopHeartbeat(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }

  /** Lists every running job that the engine did not cancel, with its fence (fields 3–5 of ActiveJob). */
  private heartbeat(): void {
    const jobs = [...this.active.values()].filter((j) => !j.cancelled);
    this.write({
      payload: {
        case: 'heartbeat',
        value: {
          workerId: this.workerId,
          activeJobs: jobs.length,
          jobs: jobs.map((j) => ({ jobId: j.jobId, startedAt: timestampFromDate(j.startedAt), runId: j.runId, executionSeq: j.executionSeq, leaseToken: j.leaseToken })),
        },
      },
    });
  }

  private whenIdle(): Promise<void> {
    if (this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

/**
 * Creates a streaming pull worker (WIRE-PROTOCOL.md section 4) speaking gRPC over HTTP/2 with
 * `@grpc/grpc-js` to `ironflow.v1.WorkerService/Connect` on the engine's port. Per connection it
 * registers its functions (optional), sends `register`, heartbeats with each job's fence, acks
 * every assignment before user code, runs jobs with the shared execution core, and ends each
 * with one fenced report: `job_completed` (with the invocation's steps and the exact result),
 * `job_failed` (always with its steps, so a retry keeps them) or, unlike the v0.29 worker,
 * `job_yielded` (field 100: the yield as JSON and the steps run before it), so runs make
 * progress past sleeps, events and invokes. `cancel` and a `stale`/`unknown` lease answer abort
 * the job. Nothing happens until `start()`.
 *
 * Throws `IronflowError` (`VALIDATION_ERROR`) for duplicate function ids or a bad
 * `maxConcurrentJobs`; a `TypeError` for a `serverUrl` that does not parse.
 */
export function createStreamWorker(options: StreamWorkerOptions): StreamWorker {
  return new GrpcStreamWorker(options);
}
