import { WakeableSleeps } from './wakeable-sleeps';
import { stopOnSignals } from './signals';
import * as grpc from '@grpc/grpc-js';
import { IronflowClientError, IronflowError, errorMessage } from './errors';
import { executeInvocation } from './execute';
import { IronflowFunction, indexFunctions } from './function';
import { baseHeaders, connectUnary, isPermanentRefusal } from './http';
import { REGISTER_FUNCTION_PROCEDURE, workerRegistrationBody } from './register-function';
import { SDK_VERSION, resolveApiKey, resolveEnvironment, resolveServerUrl } from './settings';
import { refuseUnknownOptions } from './known-options';
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
  toWireError,
  workerMessage,
  yieldJson,
} from './stream-codec';
import { EngineMessage, JobAssignment, WorkerMessage } from '@ironflow/contracts/proto';
import { STREAM_MAX_MESSAGE_BYTES, type StepResult } from '@ironflow/contracts';
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
 * - `heartbeatIntervalMs`: when set, fixed (0 = no heartbeats); when unset, the
 *   `heartbeat_interval_ms` of each `registered` answer (a positive number), else 30000.
 * - `reconnectDelayMs`: wait after a failed connection or registration, and after a stream the
 *   engine ended following its `shutdown`; default 5000. After any other clean stream end the
 *   worker reconnects at once (unless the stream lasted under 1 s).
 * - `maxReportBytes`: largest encoded terminal report (`job_completed` / `job_yielded` /
 *   `job_failed`) the worker sends; default 4194304 (4 MiB, the engine's default message
 *   limit). A larger one is replaced by a `PAYLOAD_TOO_LARGE` failure (see {@link StreamWorker}).
 *   Lowered automatically when the engine ends a stream for a message over its own limit.
 * - `registerFunctions`: call `RegisterFunction` (Connect JSON over HTTP/1.1, as the REST worker
 *   does) for each function before each connection; default true. The v0.29 streaming worker
 *   does not, so its functions must exist already.
 * - `requestTimeoutMs`: deadline of each `RegisterFunction` call; default 30000.
 * - `handleSignals`: default true: from `start()` until the worker stops, SIGTERM and SIGINT
 *   `stop()` it (the engine gets its in-flight jobs back), then end the process as the signal
 *   would — unless the app listens to that signal itself.
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
  maxReportBytes?: number;
  handleSignals?: boolean;
  logger?: WorkerLogger;
}

/** The keys of {@link StreamWorkerOptions}; `createStreamWorker` refuses any other. */
const STREAM_WORKER_OPTION_KEYS: ReadonlySet<string> = new Set([
  'serverUrl', 'apiKey', 'functions', 'maxConcurrentJobs', 'environment', 'labels', 'heartbeatIntervalMs', 'reconnectDelayMs', 'registerFunctions',
  'requestTimeoutMs', 'maxReportBytes', 'handleSignals', 'logger',
] satisfies (keyof StreamWorkerOptions)[]);

/** Default of `maxReportBytes`: the engine's default payload and stream message limit (4 MiB). */
export const DEFAULT_MAX_REPORT_BYTES = 4 * 1024 * 1024;

/**
 * A pull worker over the `ironflow.v1.WorkerService/Connect` stream. Same lifecycle as the REST
 * {@link Worker}: `start()` resolves once the engine answered `registered` (retrying every
 * `reconnectDelayMs` while unreachable) and rejects with {@link IronflowClientError} when the
 * engine refuses the credentials (`unauthenticated` / `permission_denied`); `stop()` aborts
 * running handlers and half-closes the stream (cancelling it if the engine has not ended it within
 * 2 s): the engine gives the jobs of a closed stream back to the queue at once, so another worker
 * runs them without waiting for their leases to expire; `drain()` takes no new jobs, waits for the
 * running ones to report, then stops.
 *
 * When a stream ends for another reason (a broken connection) the engine releases its jobs too,
 * so the worker aborts the handlers still running them (no report: it would be stale) — except
 * after the engine's `shutdown` or a `resource_exhausted` end, where the engine keeps their leases
 * and the jobs go on.
 *
 * Differences from the v0.29 streaming worker (deliberate):
 * - The engine's `shutdown` (a normal engine stop or restart) does not stop the worker for good:
 *   it takes no new jobs on that stream, keeps heartbeating, lets the jobs in flight finish and
 *   report, then half-closes the stream; once the stream has ended (or the engine closed it first)
 *   it reconnects after `reconnectDelayMs`, like after a stream error. Only `stop()` / `drain()`
 *   end the worker.
 * - A terminal report written while no stream is open (the stream ended while its job ran) is
 *   kept and sent after the next `registered`; the engine judges such a report by its fence.
 *   Reports still kept when the worker stops are dropped (logged).
 * - A terminal report whose encoding exceeds `maxReportBytes` is not sent; the job is reported
 *   `job_failed` instead, with the same fence, no steps, and `error = {message, code:
 *   "PAYLOAD_TOO_LARGE", retryable: false}` (the message says which report, how many bytes, and
 *   its largest part), so the run fails at once. The engine itself ends a stream that carries a
 *   message over its limit with `resource_exhausted` (the job would then be recovered by lease
 *   expiry and run again, and again); when that happens anyway (an engine limit below
 *   `maxReportBytes`), the worker lowers `maxReportBytes` to the limit named in the error and,
 *   after reconnecting, reports each job whose terminal on that stream was over it as such a
 *   `PAYLOAD_TOO_LARGE` failure.
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

/** A terminal report written on the current stream, remembered in case the engine refuses its size. */
interface WrittenReport {
  jobId: string;
  executionSeq: bigint;
  leaseToken: string;
  kind: string;
  bytes: number;
  /** What the report held (sizes, see `describeParts`); computed when written, so no payload is kept. */
  description: string;
}

/** How many terminal reports of the current stream are remembered for a `resource_exhausted` end. */
const REMEMBERED_REPORTS = 256;

/** The engine's message limit named in a `resource_exhausted` status (Connect or gRPC wording); undefined if none. */
export function messageLimitOf(details: string): number | undefined {
  const match = /readMaxBytes (\d+)/.exec(details) ?? /larger than max \(\d+ vs\.? (\d+)\)/.exec(details);
  const limit = match ? Number(match[1]) : NaN;
  return Number.isSafeInteger(limit) && limit > 0 ? limit : undefined;
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

/** Stream ends no reconnect can change (bad key, wrong env, a `register` refused as invalid), as HTTP refusals. */
const REFUSED = new Map<number, { code: string; status: number }>([
  [grpc.status.UNAUTHENTICATED, { code: 'unauthenticated', status: 401 }],
  [grpc.status.PERMISSION_DENIED, { code: 'permission_denied', status: 403 }],
  [grpc.status.INVALID_ARGUMENT, { code: 'invalid_argument', status: 400 }],
]);

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
  /** Whether the current stream was answered `registered`. */
  private streamRegistered = false;
  /** Current heartbeat interval; follows each `registered` answer unless `heartbeatFixed`. */
  private heartbeatMs: number | undefined;
  private readonly heartbeatFixed: boolean;
  private heartbeatTimerMs?: number;
  private maxReportBytes: number;
  /** The stream on which the engine sent `shutdown`: no new jobs there; reconnect after it ends. */
  private shutdownCall?: grpc.ClientDuplexStream<WorkerMessage, EngineMessage>;
  /** Terminal reports written on the current stream (newest last, at most {@link REMEMBERED_REPORTS}). */
  private written: WrittenReport[] = [];
  /** Terminal reports to send after the next `registered`, by job id. */
  private readonly unsent = new Map<string, WorkerMessage>();

  private client?: grpc.Client;
  private call?: grpc.ClientDuplexStream<WorkerMessage, EngineMessage>;
  private readonly active = new Map<string, ActiveJob>();
  private readonly idleWaiters: (() => void)[] = [];
  private readonly sleeps = new WakeableSleeps();
  private heartbeatTimer?: NodeJS.Timeout;
  private loop?: Promise<void>;
  private startPromise?: Promise<void>;
  private settleStart?: { resolve: () => void; reject: (err: unknown) => void };
  private readonly handleSignals: boolean;
  private unregisterSignals?: () => void;

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
    this.heartbeatFixed = options.heartbeatIntervalMs !== undefined;
    this.maxReportBytes = options.maxReportBytes ?? DEFAULT_MAX_REPORT_BYTES;
    this.reconnectMs = options.reconnectDelayMs ?? 5_000;
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.registerFunctions = options.registerFunctions ?? true;
    this.handleSignals = options.handleSignals ?? true;
    this.log = options.logger ?? defaultLogger;
    grpcTarget(this.baseUrl); // throws a TypeError for a URL that does not parse
  }

  start(): Promise<void> {
    if (this.state === 'stopped') return Promise.reject(new IronflowError('worker is stopped', { code: 'WORKER_STOPPED' }));
    if (this.startPromise) return this.startPromise;
    this.startPromise = new Promise<void>((resolve, reject) => (this.settleStart = { resolve, reject }));
    this.state = 'connecting';
    const { target, credentials } = grpcTarget(this.baseUrl);
    // Assignments carry every memoized step output (twice: Struct and exact JSON); grpc-js would
    // refuse anything over its 4 MiB default and break the stream, so accept what the engine sends.
    this.client = new grpc.Client(target, credentials, { 'grpc.max_receive_message_length': STREAM_MAX_MESSAGE_BYTES });
    if (this.handleSignals) this.unregisterSignals = stopOnSignals(() => this.stop());
    this.loop = this.run();
    return this.startPromise;
  }

  async stop(): Promise<void> {
    let cancelLater: NodeJS.Timeout | undefined;
    if (this.state !== 'stopped') {
      this.state = 'stopped';
      this.unregisterSignals?.();
      this.stopHeartbeat();
      for (const job of this.active.values()) {
        job.cancelled = true;
        job.abort.abort();
      }
      // Half-close: the engine ends the stream and gives its jobs back; cancel if it does not answer.
      const call = this.call;
      if (call && !call.destroyed && !call.writableEnded) {
        call.end();
        cancelLater = setTimeout(() => call.cancel(), STOP_GRACE_MS);
        cancelLater.unref();
      } else {
        call?.cancel();
      }
      this.sleeps.wakeAll();
      this.settleStart?.resolve();
    }
    await this.loop;
    clearTimeout(cancelLater);
    this.client?.close();
    if (this.unsent.size > 0) {
      this.log.warn('worker stopped with reports it could not send; lease expiry recovers those runs', { worker_id: this.workerId, job_ids: [...this.unsent.keys()] });
      this.unsent.clear();
    }
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
          if (isPermanentRefusal(err)) return this.refused(err);
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
      const afterShutdown = this.shutdownCall !== undefined && this.shutdownCall === this.call;
      this.shutdownCall = undefined;
      this.call = undefined;
      if (status.code === grpc.status.RESOURCE_EXHAUSTED) this.reportsOverLimit(status.details);
      this.written = [];
      if (!this.running) break;
      // The engine gave this stream's jobs back (it keeps them only while it shuts down or after a message it could not read).
      if (!afterShutdown && status.code !== grpc.status.RESOURCE_EXHAUSTED) this.abandonJobs();
      // invalid_argument refuses the `register` only before `registered`; later it is one message's fault.
      const refusal = status.code === grpc.status.INVALID_ARGUMENT && this.streamRegistered ? undefined : REFUSED.get(status.code);
      if (refusal) return this.refused(new IronflowClientError(`worker stream refused: ${status.details}`, refusal.code, refusal.status));
      const clean = status.code === grpc.status.OK;
      const delay = clean && !afterShutdown && Date.now() - opened >= 1_000 ? 0 : this.reconnectMs;
      this.log.warn(afterShutdown ? 'worker stream ended after the engine shut down; reconnecting' : 'worker stream ended; reconnecting', {
        worker_id: this.workerId,
        code: status.code,
        details: status.details,
        retry_in_ms: delay,
      });
      if (delay > 0) await this.sleeps.sleep(delay);
    }
  }

  private refused(err: IronflowClientError): void {
    this.log.error(err.status === 401 || err.status === 403 ? 'engine refused the credentials; worker stops' : 'engine refused the registration; worker stops', { worker_id: this.workerId, error: err.message });
    this.settleStart?.reject(err);
    this.settleStart = undefined;
    this.state = 'stopped';
    this.unregisterSignals?.();
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
    this.streamRegistered = false;
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

  /** Writes one message (a built message is written as is); false when no stream is open or the write threw. */
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

  /**
   * Sends a terminal report of `job`: a report whose encoding exceeds `maxReportBytes` is replaced
   * by a `PAYLOAD_TOO_LARGE` failure; one that cannot be written (no open stream) is kept for the
   * next stream. `describe` says what the report holds, for that failure's message.
   */
  private sendReport(job: ActiveJob, init: WorkerMessageInit, describe: () => string): void {
    let message = workerMessage(init);
    const bytes = serializeWorkerMessage(message).length;
    const kind = (message.payload.case ?? 'report').replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`); // job_completed…
    if (bytes > this.maxReportBytes) {
      const text = `${kind} report of ${bytes} bytes (${describe()}) is over the stream's message limit of ${this.maxReportBytes} bytes`;
      this.log.warn('report too large; the job is reported failed (PAYLOAD_TOO_LARGE)', { worker_id: this.workerId, job_id: job.jobId, run_id: job.runId, error: text });
      message = tooLargeFailure(job.jobId, job.executionSeq, job.leaseToken, text);
    }
    if (!this.write(message)) {
      this.log.warn('no open stream; report kept for the next one', { worker_id: this.workerId, job_id: job.jobId, report: message.payload.case });
      this.unsent.set(job.jobId, message);
      return;
    }
    if (message.payload.case === 'jobFailed' && message.payload.value.error?.code === PAYLOAD_TOO_LARGE) return;
    this.written.push({ jobId: job.jobId, executionSeq: job.executionSeq, leaseToken: job.leaseToken, kind, bytes, description: describe() });
    if (this.written.length > REMEMBERED_REPORTS) this.written.shift();
  }

  /**
   * The engine ended the stream with `resource_exhausted`: a message was over its limit. Lowers
   * `maxReportBytes` to the limit it named and queues a `PAYLOAD_TOO_LARGE` failure (same fence)
   * for each report of that stream that was over it; they go out after the next `registered`.
   */
  private reportsOverLimit(details: string): void {
    const limit = messageLimitOf(details);
    if (limit === undefined) {
      this.log.warn('engine refused a message as too large, without naming its limit', { worker_id: this.workerId, details });
      return;
    }
    this.maxReportBytes = Math.min(this.maxReportBytes, limit);
    for (const report of this.written) {
      if (report.bytes <= limit) continue;
      const text = `${report.kind} report of ${report.bytes} bytes (${report.description}) is over the engine's message limit of ${limit} bytes`;
      this.log.warn('engine refused a report as too large; the job will be reported failed (PAYLOAD_TOO_LARGE)', { worker_id: this.workerId, job_id: report.jobId, error: text });
      this.unsent.set(report.jobId, tooLargeFailure(report.jobId, report.executionSeq, report.leaseToken, text));
    }
  }

  /** Sends the reports kept while no stream was open (right after `registered`). */
  private flushUnsent(): void {
    for (const [jobId, message] of [...this.unsent]) {
      if (!this.write(message)) return;
      this.unsent.delete(jobId);
    }
  }

  private onMessage(message: EngineMessage): void {
    const { payload } = message;
    switch (payload.case) {
      case 'registered':
        this.streamRegistered = true;
        if (this.state === 'connecting') this.state = 'connected';
        if (!this.heartbeatFixed) this.heartbeatMs = payload.value.heartbeatIntervalMs > 0 ? payload.value.heartbeatIntervalMs : 30_000;
        this.startHeartbeat();
        this.flushUnsent();
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
        this.engineShutdown(payload.value.reason);
        return;
      default:
        this.log.info?.('engine message ignored', { worker_id: this.workerId, message: payload.case ?? 'unknown' });
    }
  }

  /**
   * The engine's `shutdown`: no new jobs on this stream; once the jobs in flight are done (they
   * report on it), half-close it. The run loop reconnects after `reconnectDelayMs` when it ends.
   * Nothing to do when the user is already draining or stopping.
   */
  private engineShutdown(reason: string): void {
    const call = this.call;
    if (!call || this.state === 'draining' || this.state === 'stopped' || this.shutdownCall === call) return;
    this.shutdownCall = call;
    this.log.info?.('engine is shutting down; draining', { worker_id: this.workerId, reason, active_jobs: this.active.size, then: 'reconnect' });
    void this.whenIdle().then(() => {
      if (this.call === call && !call.writableEnded) call.end();
    });
  }

  /** Aborts every running job without a report: the engine released them when their stream ended. */
  private abandonJobs(): void {
    for (const job of this.active.values()) {
      if (job.cancelled) continue;
      job.cancelled = true;
      job.abort.abort();
      this.log.warn('stream ended; the engine gave this job back, so it stops here without a report', { worker_id: this.workerId, job_id: job.jobId });
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
    if (this.active.has(assignment.jobId) || this.active.size >= this.maxJobs || this.state !== 'connected' || (this.shutdownCall !== undefined && this.shutdownCall === this.call)) {
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
      const error = { message: `function "${assignment.functionId}" is not served by this worker`, code: 'FUNCTION_NOT_FOUND', retryable: false };
      this.sendReport(job, { payload: { case: 'jobFailed', value: { jobId: job.jobId, ...fence, durationMs: 0, error } } }, () => describeParts({ error }, []));
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
      publishTo: { serverUrl: this.baseUrl, apiKey: this.apiKey, environment: this.environment },
    });
    const durationMs = Date.now() - started;
    const steps = outcome.steps.map(toExecutedStep);
    if (job.cancelled) {
      // Cancelled by the engine, given back by stop() or by a closed stream: a report would be stale.
      this.log.info?.('job cancelled or given back; no report', { worker_id: this.workerId, job_id: job.jobId });
    } else if (outcome.status === 'completed') {
      this.sendReport(
        job,
        { payload: { case: 'jobCompleted', value: { jobId: job.jobId, ...fence, durationMs, outputJson: jsonText(outcome.result), steps } } },
        () => describeParts({ output: outcome.result }, outcome.steps),
      );
    } else if (job.abort.signal.aborted) {
      this.log.info?.('job aborted; no report', { worker_id: this.workerId, job_id: job.jobId });
    } else if (outcome.status === 'failed') {
      const error = toWireError(outcome.error);
      this.sendReport(job, { payload: { case: 'jobFailed', value: { jobId: job.jobId, ...fence, durationMs, error, steps } } }, () => describeParts({ error: outcome.error }, outcome.steps));
    } else {
      // With the send time: the engine places a sleep's `until` on its own clock with it.
      const text = yieldJson({ ...outcome.yield, sent_at: new Date().toISOString() });
      this.sendReport(job, { payload: { case: 'jobYielded', value: { jobId: job.jobId, ...fence, durationMs, yieldJson: text, steps } } }, () => describeParts({ yield: outcome.yield }, outcome.steps));
    }
  }

  /** Starts the heartbeat timer, or restarts it when the interval changed. */
  private startHeartbeat(): void {
    if (this.heartbeatTimer && this.heartbeatTimerMs === this.heartbeatMs) return;
    this.stopHeartbeat();
    if (!this.heartbeatMs || this.heartbeatMs <= 0) return;
    this.heartbeatTimerMs = this.heartbeatMs;
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

const PAYLOAD_TOO_LARGE = 'PAYLOAD_TOO_LARGE';
/** How long `stop()` waits for the engine to end a half-closed stream before cancelling it, in ms. */
const STOP_GRACE_MS = 2_000;

/** The `job_failed` that replaces a report too large to send: same fence, no steps, not retryable. */
function tooLargeFailure(jobId: string, executionSeq: bigint, leaseToken: string, message: string): WorkerMessage {
  return workerMessage({ payload: { case: 'jobFailed', value: { jobId, executionSeq, leaseToken, durationMs: 0, error: { message, code: PAYLOAD_TOO_LARGE, retryable: false } } } });
}

const bytesOf = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '');

/**
 * `output 5242890 bytes, 2 step(s) 120 bytes, largest "load" 80 bytes` (JSON sizes of the parts
 * given and of the steps); for an `error` part, its message (first 200 characters) follows as
 * `; the run's error: …`, so a replaced failure keeps what went wrong.
 */
function describeParts(parts: { output?: unknown; yield?: unknown; error?: { message: string } }, steps: StepResult[]): string {
  const out = Object.entries(parts)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `${name} ${bytesOf(value)} bytes`);
  if (steps.length > 0) {
    const largest = steps.map((step) => ({ step, bytes: bytesOf(step) })).reduce((a, b) => (b.bytes > a.bytes ? b : a));
    out.push(`${steps.length} step(s) ${bytesOf(steps)} bytes, largest "${largest.step.name}" ${largest.bytes} bytes`);
  }
  return `${out.join(', ')}${parts.error ? `; the run's error: ${parts.error.message.slice(0, 200)}` : ''}`;
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
 * the job. The engine's `shutdown` drains the stream and reconnects; oversized reports become
 * `PAYLOAD_TOO_LARGE` failures (see {@link StreamWorker}). Nothing happens until `start()`.
 *
 * Throws `IronflowError` (`VALIDATION_ERROR`) for duplicate function ids or a bad
 * `maxConcurrentJobs`; a `TypeError` for a `serverUrl` that does not parse.
 */
export function createStreamWorker(options: StreamWorkerOptions): StreamWorker {
  refuseUnknownOptions('createStreamWorker', options, STREAM_WORKER_OPTION_KEYS);
  return new GrpcStreamWorker(options);
}
