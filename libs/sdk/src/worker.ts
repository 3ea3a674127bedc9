import { WakeableSleeps } from './wakeable-sleeps';
import type { JobAckBody, JobAssignment, JobUpdateBody, WorkerHeartbeatBody, WorkerRegisterBody } from '@ironflow/contracts';
import { Checkpointer, MAX_STEPS_PER_CHECKPOINT } from './checkpointer';
import { IronflowClientError, IronflowError, errorMessage } from './errors';
import { executeInvocation } from './execute';
import { IronflowFunction, indexFunctions } from './function';
import { RawResponse, baseHeaders, connectUnary, httpError, isPermanentRefusal, parseJson, sendRaw } from './http';
import { REGISTER_FUNCTION_PROCEDURE, workerRegistrationBody } from './register-function';
import { SDK_VERSION, resolveApiKey, resolveEnvironment, resolveServerUrl } from './settings';
import type { PublishTarget } from './publish';
import { checkJobAssignment } from './wire-validation';
import { refuseUnknownOptions } from './known-options';
import { stopOnSignals } from './signals';

/** Where the worker reports what it does. Every method is optional except `warn` and `error`. */
export interface WorkerLogger {
  info?(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** First wait before a terminal report (or its final progress flush) is sent again, in ms; doubles per failure. */
export const REPORT_RETRY_FIRST_DELAY_MS = 200;
/** Ceiling of the wait between two attempts of a terminal report, in ms. */
export const REPORT_RETRY_MAX_DELAY_MS = 5_000;
/** Default of `reportRetryTimeoutMs`: how long a job keeps retrying its final reports, in ms. */
export const DEFAULT_REPORT_RETRY_TIMEOUT_MS = 60_000;

/**
 * Options of {@link createWorker}. Durations are in ms.
 * - `serverUrl`: default env `IRONFLOW_SERVER_URL`, else `http://localhost:9123`.
 * - `apiKey`: `Authorization: Bearer`; default env `IRONFLOW_API_KEY` (empty = unset).
 * - `functions`: the functions this worker runs (ids unique).
 * - `maxConcurrentJobs`: default 10.
 * - `environment`: `X-Ironflow-Environment`; default env `IRONFLOW_ENV`, else `"default"`.
 * - `heartbeatIntervalMs`: when set, fixed (0 = no heartbeats); when unset, the
 *   `heartbeat_interval_ms` of the engine's register answer (a positive number), else 30000.
 * - `pollIntervalMs` (sleep after an empty poll or at capacity): default 1000.
 *   `checkpointIntervalMs` (progress debounce, 0 = off): default 1000.
 * - `labels`: reported at registration; default `{}`.
 * - `reconnectDelayMs` (after a failed registration): default 5000. `pollErrorDelayMs` (after a
 *   failed poll): default 5000. `requestTimeoutMs` (every HTTP call): default 30000.
 * - `reportRetryTimeoutMs`: how long a job's final reports (the last progress flushes and the
 *   terminal update) are retried after network errors and 5xx answers, counted from the first
 *   of them; default 60000 (see {@link Worker}).
 * - `handleSignals`: default true: from `start()` until the worker stops, SIGTERM and SIGINT
 *   `stop()` it (its in-flight jobs are given back to the engine), then end the process as the
 *   signal would — unless the app listens to that signal itself (then the app owns the exit).
 * - `logger`: default logs warnings and errors to the console.
 */
export interface WorkerOptions {
  serverUrl?: string;
  apiKey?: string;
  functions: readonly IronflowFunction<any, any>[];
  maxConcurrentJobs?: number;
  environment?: string;
  heartbeatIntervalMs?: number;
  pollIntervalMs?: number;
  checkpointIntervalMs?: number;
  labels?: Record<string, string>;
  reconnectDelayMs?: number;
  pollErrorDelayMs?: number;
  requestTimeoutMs?: number;
  reportRetryTimeoutMs?: number;
  handleSignals?: boolean;
  logger?: WorkerLogger;
}

/** The keys of {@link WorkerOptions}; `createWorker` refuses any other. */
const WORKER_OPTION_KEYS: ReadonlySet<string> = new Set([
  'serverUrl', 'apiKey', 'functions', 'maxConcurrentJobs', 'environment', 'heartbeatIntervalMs', 'pollIntervalMs', 'checkpointIntervalMs', 'labels',
  'reconnectDelayMs', 'pollErrorDelayMs', 'requestTimeoutMs', 'reportRetryTimeoutMs', 'handleSignals', 'logger',
] satisfies (keyof WorkerOptions)[]);

/**
 * A pull worker over REST (WIRE-PROTOCOL.md 3).
 *
 * Final reports of a job (deliberate improvements over the v0.29 worker, which sends its terminal
 * update once and only logs a failure, leaving the run to the lease expiry and a re-run of its
 * steps):
 * - The terminal update (`completed` / `failed` / `yielded`) and the progress flushes that
 *   precede it are retried after a network error or a 5xx answer (e.g. an engine restarting),
 *   waiting 200 ms, doubling, at most 5000 ms between attempts, for at most
 *   `reportRetryTimeoutMs` (default 60000) in all; the worker gives up at once when it is
 *   stopped (`stop()`, or refused credentials; `drain()` waits for these retries). A 4xx is
 *   never retried: 413 is handled as below; 409 (stale execution or run no longer running), 400
 *   and any other 4xx drop the report with a log line (a refused progress update also turns
 *   checkpointing off for the job, as before; a progress update refused 409 also stops the job
 *   like a heartbeat's `lost`: its `signal` aborts and it sends no report). Retrying is safe:
 *   the engine answers a repeated report of an outcome it already committed with success and no
 *   effect. The job keeps its slot (and stays in heartbeats) while it retries.
 * - A report refused with 413 (too large, e.g. a step output over the engine's 4 MiB payload
 *   limit), be it the terminal update or a progress update of the job, is replaced by a `failed`
 *   update with the same fence, no steps, and `error = {message, code: "PAYLOAD_TOO_LARGE",
 *   retryable: false}` (the message says which report, how many bytes, its largest part and,
 *   for a `failed` report, the run's error message), so the run fails at once instead of looping
 *   through lease recovery.
 */
export interface Worker {
  /** `worker-<base36 ms>-<6 base36 chars>`, fixed for the worker's life. */
  readonly workerId: string;
  /**
   * Starts registering, heartbeating and polling in the background. Resolves once the functions
   * and the worker are registered (retrying every `reconnectDelayMs` while the engine is
   * unreachable), or when the worker is stopped first. Rejects with {@link IronflowClientError}
   * when the engine refuses for good — the credentials (401/403), a function or the worker as
   * invalid (400 `VALIDATION_ERROR`), a route it does not have (404) — and the worker is then
   * stopped; timeouts, 409, 429 and 5xx are retried.
   * Rejects with `IronflowError` `WORKER_STOPPED` when called after `stop()`.
   */
  start(): Promise<void>;
  /**
   * Stops now: no more polls or heartbeats, timers cleared, active handlers' `signal` aborted, and
   * the work in flight given back, so another worker runs it at once instead of after the lease
   * expires: each job still running flushes its unsent checkpoints (one attempt) and is released
   * (`PUT …/jobs/{jobId}/release` with its fence); it sends no terminal update afterwards, even if
   * its handler returns. A job whose terminal update is already being sent finishes that send
   * (one attempt: reports are not retried after `stop()`). Resolves when the background loop has
   * exited and the releases were answered (it does not wait for running handlers).
   */
  stop(): Promise<void>;
  /**
   * Stops polling, waits for every active job to finish and report (including report retries,
   * at most `reportRetryTimeoutMs` each), then {@link stop}s.
   */
  drain(): Promise<void>;
}

type WorkerState = 'idle' | 'connecting' | 'connected' | 'draining' | 'stopped';

interface ActiveJob {
  job: JobAssignment;
  startedAt: string;
  abort: AbortController;
  /** Released by `stop()`, or answered lost by a heartbeat or a checkpoint refused 409: it sends no report. */
  gone: boolean;
  /** Its terminal update is being sent: `stop()` lets that finish instead of releasing it. */
  reporting: boolean;
  /** Flushes the job's unsent checkpoints once (set while its handler runs). */
  flush?: () => Promise<void>;
}

const defaultLogger: WorkerLogger = {
  warn: (message, fields) => console.warn(`[ironflow worker] ${message}`, fields ?? ''),
  error: (message, fields) => console.error(`[ironflow worker] ${message}`, fields ?? ''),
};

function newWorkerId(): string {
  let suffix = '';
  while (suffix.length < 6) suffix += Math.floor(Math.random() * 36).toString(36);
  return `worker-${Date.now().toString(36)}-${suffix}`;
}

const isAuthStatus = (status: number) => status === 401 || status === 403;

class PullWorker implements Worker {
  readonly workerId = newWorkerId();
  private state: WorkerState = 'idle';
  private readonly functions: Map<string, IronflowFunction<any, any>>;
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly publishTo: PublishTarget;
  private readonly maxJobs: number;
  /** Current heartbeat interval; follows the register answer unless `heartbeatFixed`. */
  private heartbeatMs: number;
  private readonly heartbeatFixed: boolean;
  private readonly pollMs: number;
  private readonly checkpointMs: number;
  private readonly reconnectMs: number;
  private readonly pollErrorMs: number;
  private readonly timeoutMs: number;
  private readonly reportRetryMs: number;
  private readonly labels: Record<string, string>;
  private readonly log: WorkerLogger;

  private readonly active = new Map<string, ActiveJob>();
  private readonly idleWaiters: (() => void)[] = [];
  private readonly sleeps = new WakeableSleeps();
  /** Backoff sleeps of final reports: only `stop()` ends them early (`drain()` lets them run). */
  private readonly reportSleeps = new WakeableSleeps();
  private readonly pollAbort = new AbortController();
  private heartbeatTimer?: NodeJS.Timeout;
  private heartbeatTimerMs?: number;
  private heartbeatInFlight = false;
  private loop?: Promise<void>;
  private startPromise?: Promise<void>;
  private settleStart?: { resolve: () => void; reject: (err: unknown) => void };
  private readonly handleSignals: boolean;
  private unregisterSignals?: () => void;
  /** The give-backs `stop()` started. */
  private givingBack: Promise<unknown> = Promise.resolve();

  constructor(options: WorkerOptions) {
    this.functions = indexFunctions(options.functions);
    this.baseUrl = resolveServerUrl(options.serverUrl);
    this.headers = baseHeaders(resolveApiKey(options.apiKey), resolveEnvironment(options.environment));
    this.publishTo = { serverUrl: this.baseUrl, apiKey: options.apiKey, environment: resolveEnvironment(options.environment) };
    this.maxJobs = options.maxConcurrentJobs ?? 10;
    if (!(Number.isInteger(this.maxJobs) && this.maxJobs >= 1)) throw new IronflowError('maxConcurrentJobs must be an integer >= 1', { code: 'VALIDATION_ERROR' });
    this.heartbeatFixed = options.heartbeatIntervalMs !== undefined;
    this.heartbeatMs = options.heartbeatIntervalMs ?? 30_000;
    this.pollMs = options.pollIntervalMs ?? 1_000;
    this.checkpointMs = options.checkpointIntervalMs ?? 1_000;
    this.reconnectMs = options.reconnectDelayMs ?? 5_000;
    this.pollErrorMs = options.pollErrorDelayMs ?? 5_000;
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.reportRetryMs = options.reportRetryTimeoutMs ?? DEFAULT_REPORT_RETRY_TIMEOUT_MS;
    this.labels = { ...(options.labels ?? {}) };
    this.handleSignals = options.handleSignals ?? true;
    this.log = options.logger ?? defaultLogger;
  }

  start(): Promise<void> {
    if (this.state === 'stopped') return Promise.reject(new IronflowError('worker is stopped', { code: 'WORKER_STOPPED' }));
    if (this.startPromise) return this.startPromise;
    this.startPromise = new Promise<void>((resolve, reject) => (this.settleStart = { resolve, reject }));
    this.state = 'connecting';
    if (this.handleSignals) this.unregisterSignals = stopOnSignals(() => this.stop());
    this.loop = this.run();
    return this.startPromise;
  }

  async stop(): Promise<void> {
    if (this.state !== 'stopped') {
      this.state = 'stopped';
      this.unregisterSignals?.();
      if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
      this.heartbeatTimer = undefined;
      this.pollAbort.abort();
      const inFlight = [...this.active.values()].filter((entry) => !entry.reporting && !entry.gone);
      for (const entry of inFlight) entry.gone = true;
      for (const entry of this.active.values()) entry.abort.abort();
      this.sleeps.wakeAll();
      this.reportSleeps.wakeAll();
      this.settleStart?.resolve();
      this.givingBack = Promise.all(inFlight.map((entry) => this.giveBack(entry)));
    }
    await this.loop;
    await this.givingBack;
  }

  /** `stop()`: flushes a running job's unsent checkpoints (one attempt), then releases it. */
  private async giveBack(entry: ActiveJob): Promise<void> {
    const { job } = entry;
    const fields = { worker_id: this.workerId, job_id: job.job_id, run_id: job.run_id };
    try {
      await entry.flush?.();
      const fence: JobAckBody = job.lease_token ? { run_id: job.run_id, lease_token: job.lease_token, ...(job.execution_seq !== undefined ? { execution_seq: job.execution_seq } : {}) } : { run_id: job.run_id };
      const res = await this.call('PUT', `${this.jobPath(job)}/release`, fence);
      if (res.status >= 200 && res.status < 300) this.log.info?.('job given back to the engine', fields);
      else this.log.warn('release refused; the lease expiry recovers the job', { ...fields, status: res.status, body: res.text.slice(0, 200) });
    } catch (err) {
      this.log.warn('release failed; the lease expiry recovers the job', { ...fields, error: errorMessage(err) });
    }
  }

  async drain(): Promise<void> {
    if (this.state === 'stopped') return this.stop();
    this.state = 'draining';
    this.pollAbort.abort();
    this.sleeps.wakeAll();
    await this.loop;
    await this.whenIdle();
    await this.stop();
  }

  private get stopped(): boolean {
    return this.state === 'stopped';
  }

  private get running(): boolean {
    return this.state === 'connecting' || this.state === 'connected';
  }

  /** Registration (R1, R2), then polling, until stopped, drained or refused. */
  private async run(): Promise<void> {
    while (this.running) {
      this.state = 'connecting';
      try {
        await this.register();
      } catch (err) {
        if (isPermanentRefusal(err)) return this.refused(err);
        if (!this.running) break;
        this.log.warn('registration failed; retrying', { worker_id: this.workerId, error: errorMessage(err), retry_in_ms: this.reconnectMs });
        await this.sleeps.sleep(this.reconnectMs);
        continue;
      }
      if (!this.running) break;
      this.state = 'connected';
      this.settleStart?.resolve();
      this.startHeartbeat();
      const reason = await this.pollLoop();
      if (reason instanceof IronflowClientError) return this.refused(reason);
      if (reason === 'reregister') this.log.info?.('engine does not know this worker; registering again', { worker_id: this.workerId });
    }
  }

  private async refused(err: IronflowClientError): Promise<void> {
    this.log.error(isAuthStatus(err.status) ? 'engine refused the credentials; worker stops' : 'engine refused the registration; worker stops', { worker_id: this.workerId, status: err.status, error: err.message });
    this.settleStart?.reject(err);
    this.settleStart = undefined;
    this.state = 'stopped';
    this.unregisterSignals?.();
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    for (const job of this.active.values()) job.abort.abort();
    this.reportSleeps.wakeAll();
  }

  /**
   * R1 for each function (in order), then R2; adopts the answer's `heartbeat_interval_ms` (a
   * positive number) unless `heartbeatIntervalMs` was set. Throws IronflowClientError / network errors.
   */
  private async register(): Promise<void> {
    for (const fn of this.functions.values()) {
      await connectUnary(this.baseUrl, REGISTER_FUNCTION_PROCEDURE, workerRegistrationBody(fn), { headers: this.headers, timeoutMs: this.timeoutMs });
    }
    const body: WorkerRegisterBody = {
      worker_id: this.workerId,
      hostname: process.env.HOSTNAME || 'unknown',
      function_ids: [...this.functions.keys()],
      max_concurrent_jobs: this.maxJobs,
      labels: this.labels,
      version: { sdk: SDK_VERSION, runtime: `node-${process.version}` },
    };
    const res = await this.call('POST', `${this.workerPath}/register`, body);
    if (res.status < 200 || res.status >= 300) throw httpError('register worker', res);
    const interval = (parseJson(res.text) as { heartbeat_interval_ms?: unknown } | null | undefined)?.heartbeat_interval_ms;
    if (!this.heartbeatFixed && typeof interval === 'number' && Number.isFinite(interval) && interval > 0) this.heartbeatMs = interval;
  }

  private get workerPath(): string {
    return `/api/v1/workers/${encodeURIComponent(this.workerId)}`;
  }

  private call(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown, signal?: AbortSignal): Promise<RawResponse> {
    return sendRaw(`${this.baseUrl}${path}`, { method, headers: this.headers, body, signal, timeoutMs: this.timeoutMs });
  }

  /** Starts the R3 timer, or restarts it when the interval changed (a new register answer). */
  private startHeartbeat(): void {
    if (this.heartbeatTimer && this.heartbeatTimerMs === this.heartbeatMs) return;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    if (this.heartbeatMs <= 0) return;
    this.heartbeatTimerMs = this.heartbeatMs;
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  /**
   * R3; only while connected; errors are logged. A job the engine answers `lost` (this worker no
   * longer holds its live lease: it expired, timed out, was recovered or cancelled) is aborted and
   * sends no report (it would be stale).
   */
  private async heartbeat(): Promise<void> {
    if (this.state !== 'connected' || this.heartbeatInFlight) return;
    this.heartbeatInFlight = true;
    const listed = [...this.active].filter(([, job]) => !job.gone);
    const body: WorkerHeartbeatBody = {
      worker_id: this.workerId,
      active_jobs: listed.length,
      jobs: listed.map(([job_id, job]) => ({ job_id, started_at: job.startedAt })),
    };
    try {
      const res = await this.call('POST', `${this.workerPath}/heartbeat`, body);
      if (res.status < 200 || res.status >= 300) this.log.warn('heartbeat refused', { worker_id: this.workerId, status: res.status });
      else this.dropLost(parseJson(res.text));
    } catch (err) {
      this.log.warn('heartbeat failed', { worker_id: this.workerId, error: errorMessage(err) });
    } finally {
      this.heartbeatInFlight = false;
    }
  }

  /** Aborts the jobs a heartbeat answer marks `lost` (ours: `{jobs: [{job_id, state}]}`; other answers are ignored). */
  private dropLost(answer: unknown): void {
    const jobs = (answer as { jobs?: unknown } | null | undefined)?.jobs;
    if (!Array.isArray(jobs)) return;
    for (const item of jobs as { job_id?: unknown; state?: unknown }[]) {
      const entry = typeof item?.job_id === 'string' && item.state === 'lost' ? this.active.get(item.job_id) : undefined;
      if (entry) this.stopLost(entry, 'a heartbeat answered it lost');
    }
  }

  /**
   * Stops a job the engine no longer counts as this worker's live execution (cancelled, timed out,
   * recovered, handed to another worker): its `signal` aborts, so no new step starts, and it sends
   * no report (it would be stale). A job already sending its final report is left to finish it.
   */
  private stopLost(entry: ActiveJob, why: string): void {
    if (entry.gone || entry.reporting) return;
    entry.gone = true;
    entry.abort.abort();
    this.log.warn('the engine no longer counts this job as ours; it is stopped without a report', { worker_id: this.workerId, job_id: entry.job.job_id, reason: why });
  }

  /** R4 loop. Returns 'reregister' on 404, an error on 401/403, 'done' when stopped or draining. */
  private async pollLoop(): Promise<'reregister' | 'done' | IronflowClientError> {
    while (this.state === 'connected') {
      const available = this.maxJobs - this.active.size;
      if (available < 1) {
        await this.sleeps.sleep(this.pollMs);
        continue;
      }
      let res: RawResponse;
      try {
        res = await this.call('GET', `${this.workerPath}/jobs?available=${available}`, undefined, this.pollAbort.signal);
      } catch (err) {
        if (this.state !== 'connected') break;
        this.log.warn('poll failed', { worker_id: this.workerId, error: errorMessage(err), retry_in_ms: this.pollErrorMs });
        await this.sleeps.sleep(this.pollErrorMs);
        continue;
      }
      if (res.status === 204) {
        await this.sleeps.sleep(this.pollMs);
        continue;
      }
      if (res.status === 404) return 'reregister';
      if (isAuthStatus(res.status)) return httpError('poll', res);
      if (res.status < 200 || res.status >= 300) {
        this.log.warn('poll refused', { worker_id: this.workerId, status: res.status, retry_in_ms: this.pollErrorMs });
        await this.sleeps.sleep(this.pollErrorMs);
        continue;
      }
      if (this.startJobs(parseJson(res.text)) === 0) await this.sleeps.sleep(this.pollMs);
    }
    return 'done';
  }

  /** Starts every valid, new assignment of a poll answer that fits; returns how many started. */
  private startJobs(body: unknown): number {
    let entries: unknown[] = [];
    if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
      const jobs = (body as { jobs?: unknown }).jobs;
      entries = Array.isArray(jobs) ? jobs : 'jobs' in body ? [] : [body];
    }
    let started = 0;
    for (const entry of entries) {
      const checked = checkJobAssignment(entry);
      if (!checked.ok) {
        this.log.warn('invalid job assignment skipped', { worker_id: this.workerId, problems: checked.problems });
        continue;
      }
      const job = checked.value;
      if (this.active.has(job.job_id)) {
        this.log.warn('job already running here; assignment skipped', { worker_id: this.workerId, job_id: job.job_id });
        continue;
      }
      if (this.active.size >= this.maxJobs || this.state !== 'connected') {
        this.log.warn('assignment beyond capacity skipped', { worker_id: this.workerId, job_id: job.job_id });
        continue;
      }
      const entryState: ActiveJob = { job, startedAt: new Date().toISOString(), abort: new AbortController(), gone: false, reporting: false };
      this.active.set(job.job_id, entryState);
      started++;
      void this.runJob(job, entryState)
        .catch((err) => this.log.error('job crashed', { worker_id: this.workerId, job_id: job.job_id, run_id: job.run_id, error: errorMessage(err) }))
        .finally(() => {
          this.active.delete(job.job_id);
          if (this.active.size === 0) this.idleWaiters.splice(0).forEach((wake) => wake());
        });
    }
    return started;
  }

  /** One job: (fenced) ack R5 → handler with checkpoints → exactly one terminal R6 (none once it is gone). */
  private async runJob(job: JobAssignment, entry: ActiveJob): Promise<void> {
    const signal = entry.abort.signal;
    const fence: Pick<JobUpdateBody, 'execution_seq' | 'lease_token'> = {};
    const fenced = typeof job.lease_token === 'string' && job.lease_token !== '';
    if (fenced) {
      if (job.execution_seq !== undefined) fence.execution_seq = job.execution_seq;
      fence.lease_token = job.lease_token;
    }
    const fields = { worker_id: this.workerId, job_id: job.job_id, run_id: job.run_id, function_id: job.function_id, execution_seq: job.execution_seq };
    const fn = this.functions.get(job.function_id);
    if (!fn) {
      this.log.warn('job for a function this worker does not serve', fields);
      const deadline = Date.now() + this.reportRetryMs;
      entry.reporting = true;
      await this.sendTerminal(job, { status: 'failed', error: { message: `function "${job.function_id}" is not served by this worker`, code: 'FUNCTION_NOT_FOUND', retryable: false }, ...fence }, fields, deadline);
      return;
    }
    if (fenced) {
      const ack: JobAckBody = { run_id: job.run_id, lease_token: job.lease_token };
      if (job.execution_seq !== undefined) ack.execution_seq = job.execution_seq;
      try {
        const res = await this.call('PUT', `${this.jobPath(job)}/ack`, ack);
        if (res.status < 200 || res.status >= 300) {
          this.log.warn('ack refused; job dropped', { ...fields, status: res.status });
          return;
        }
      } catch (err) {
        this.log.warn('ack failed; job dropped', { ...fields, error: errorMessage(err) });
        return;
      }
    }
    if (signal.aborted) return;

    /** Set when a progress update was refused as too large (413): the job then ends `failed`. */
    let progressTooLarge: string | undefined;
    const checkpoints = new Checkpointer({
      intervalMs: this.checkpointMs,
      sequenceBase: job.step_sequence_base ?? 0,
      send: async (steps, stepOffset) => {
        const body: JobUpdateBody = { status: 'progress', steps, step_offset: stepOffset, ...fence };
        const res = await this.call('PUT', this.jobPath(job), body);
        if (res.status < 200 || res.status >= 300) this.log.warn('checkpoint refused', { ...fields, status: res.status });
        if (res.status === 413) progressTooLarge ??= describeTooLarge(body, res);
        // 409 (STALE_EXECUTION, RUN_NOT_RUNNING): the execution is no longer live; learnt here
        // instead of at the next heartbeat, so the handler starts no further step.
        if (res.status === 409) this.stopLost(entry, `a checkpoint was refused: ${res.text.slice(0, 200)}`);
        return res.status;
      },
    });
    entry.flush = async () => {
      await checkpoints.settle();
      await checkpoints.flushDownTo(0);
    };
    const outcome = await executeInvocation({
      fn,
      runId: job.run_id,
      attempt: job.attempt,
      event: job.event,
      memo: job.completed_steps.map((s) => ({ id: s.step_id, name: s.name, status: 'completed' as const, output: s.output })),
      secrets: job.context?.secrets,
      transport: 'pull',
      onStep: (step) => checkpoints.record(step),
      signal,
      publishTo: this.publishTo,
    });
    await checkpoints.settle();

    if (entry.gone) {
      this.log.info?.('job given back or lost; no terminal update', fields);
      return;
    }
    if (outcome.status !== 'completed' && signal.aborted) {
      this.log.info?.('job aborted; no terminal update', fields);
      return;
    }
    entry.reporting = true;
    // Final reports: the last progress flushes and the terminal share one retry budget (see Worker).
    const deadline = Date.now() + this.reportRetryMs;
    const retry = (failures: number) => this.waitBeforeRetry(failures, deadline, 'progress', fields);
    let update: JobUpdateBody;
    if (outcome.status === 'completed') {
      await checkpoints.flushDownTo(MAX_STEPS_PER_CHECKPOINT, retry);
      update = { status: 'completed' };
      if (outcome.result !== undefined) update.output = outcome.result;
      update.steps = checkpoints.unflushed;
      update.step_offset = checkpoints.stepOffset;
    } else if (outcome.status === 'failed') {
      await checkpoints.flushDownTo(MAX_STEPS_PER_CHECKPOINT, retry);
      const { message, code, retryable } = outcome.error;
      update = { status: 'failed', error: { message, code, retryable } };
      const tail = checkpoints.unflushed;
      if (tail.length > 0) {
        update.steps = tail;
        update.step_offset = checkpoints.stepOffset;
      }
    } else {
      await checkpoints.flushDownTo(0, retry);
      update = { status: 'yielded', yield: outcome.yield };
    }
    // A progress update refused as too large (during the run or in the flushes above; checkpointing
    // is then off): its steps can never be stored, so the job fails instead of reporting.
    const refused = progressTooLarge as string | undefined;
    if (refused !== undefined) {
      this.log.warn('a progress update was refused as too large; the job fails', { ...fields, error: refused });
      update = tooLargeFailure(refused);
    }
    await this.sendTerminal(job, { ...update, ...fence }, fields, deadline);
  }

  private jobPath(job: JobAssignment): string {
    return `${this.workerPath}/jobs/${encodeURIComponent(job.job_id)}`;
  }

  /**
   * R6 terminal, retried after network errors and 5xx until `deadline` (epoch ms) or stop (see
   * {@link Worker}). A 413 replaces the update with a `PAYLOAD_TOO_LARGE` failure carrying the
   * same fence (sent under the same budget); any other refusal is logged and dropped.
   */
  private async sendTerminal(job: JobAssignment, update: JobUpdateBody, fields: Record<string, unknown>, deadline: number): Promise<void> {
    const res = await this.sendWithRetry(job, update, fields, deadline);
    if (!res || (res.status >= 200 && res.status < 300)) return;
    const tooLarge = res.status === 413 && update.error?.code !== PAYLOAD_TOO_LARGE;
    this.log.warn(`${update.status} update refused${tooLarge ? '; reporting the job failed (PAYLOAD_TOO_LARGE)' : ''}`, { ...fields, status: res.status, body: res.text.slice(0, 200) });
    if (!tooLarge) return;
    const { execution_seq, lease_token } = update;
    const failure: JobUpdateBody = tooLargeFailure(describeTooLarge(update, res));
    if (execution_seq !== undefined) failure.execution_seq = execution_seq;
    if (lease_token !== undefined) failure.lease_token = lease_token;
    const again = await this.sendWithRetry(job, failure, fields, deadline);
    if (again && (again.status < 200 || again.status >= 300)) this.log.warn('failed update refused', { ...fields, status: again.status, body: again.text.slice(0, 200) });
  }

  /**
   * Sends one R6 and resolves to the answer that ends it: a 2xx or any status below 500. Retries
   * network errors and 5xx while {@link waitBeforeRetry} allows; resolves `undefined` when it gave up.
   */
  private async sendWithRetry(job: JobAssignment, update: JobUpdateBody, fields: Record<string, unknown>, deadline: number): Promise<RawResponse | undefined> {
    for (let failures = 1; ; failures++) {
      let problem: Record<string, unknown>;
      try {
        // A yield carries its send time, per attempt: the engine places a sleep's `until` on its own clock with it.
        const body = update.status === 'yielded' ? { ...update, sent_at: new Date().toISOString() } : update;
        const res = await this.call('PUT', this.jobPath(job), body);
        if (res.status < 500) return res;
        problem = { status: res.status, body: res.text.slice(0, 200) };
      } catch (err) {
        problem = { error: errorMessage(err) };
      }
      if (!(await this.waitBeforeRetry(failures, deadline, update.status, { ...fields, ...problem }))) {
        this.log.warn(`${update.status} update failed; giving up`, { ...fields, ...problem, attempts: failures });
        return undefined;
      }
    }
  }

  /**
   * Backoff before attempt `failures + 1` of a final report: 200 ms × 2^(failures−1), at most
   * 5000 ms and at most the time left before `deadline`. Resolves false (no wait) when the
   * worker is stopped or the deadline has passed, and false when it is stopped during the wait.
   */
  private async waitBeforeRetry(failures: number, deadline: number, what: string, fields: Record<string, unknown>): Promise<boolean> {
    const left = deadline - Date.now();
    if (this.stopped || left <= 0) return false;
    const delay = Math.min(REPORT_RETRY_FIRST_DELAY_MS * 2 ** (failures - 1), REPORT_RETRY_MAX_DELAY_MS, left);
    this.log.info?.(`${what} update failed; retrying`, { ...fields, attempt: failures, retry_in_ms: delay });
    await this.reportSleeps.sleep(delay);
    return !this.stopped;
  }

  private whenIdle(): Promise<void> {
    if (this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

const PAYLOAD_TOO_LARGE = 'PAYLOAD_TOO_LARGE';

/** The `failed` update that replaces a report the engine refused as too large (no steps, no fence yet). */
function tooLargeFailure(message: string): JobUpdateBody {
  return { status: 'failed', error: { message, code: PAYLOAD_TOO_LARGE, retryable: false } };
}

const bytesOf = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '');

/**
 * What was too large, for the `PAYLOAD_TOO_LARGE` message: the report's status and JSON size in
 * bytes, its output / yield / error size, its step count, total and largest step size (JSON
 * bytes), the engine's reason, and for a `failed` report the run's error message (first 200
 * characters).
 */
function describeTooLarge(update: JobUpdateBody, res: RawResponse): string {
  const parts: string[] = [];
  if (update.output !== undefined) parts.push(`output ${bytesOf(update.output)} bytes`);
  if (update.yield !== undefined) parts.push(`yield ${bytesOf(update.yield)} bytes`);
  if (update.error !== undefined) parts.push(`error ${bytesOf(update.error)} bytes`);
  const steps = update.steps ?? [];
  if (steps.length > 0) {
    const sizes = steps.map((step) => ({ step, bytes: bytesOf(step) }));
    const largest = sizes.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    parts.push(`${steps.length} step(s) ${bytesOf(steps)} bytes, largest "${largest.step.name}" ${largest.bytes} bytes`);
  }
  const answer = parseJson(res.text) as { message?: unknown } | null | undefined;
  const reason = typeof answer?.message === 'string' && answer.message !== '' ? `; engine: ${answer.message}` : '';
  const runError = update.error ? `; the run's error: ${update.error.message.slice(0, 200)}` : '';
  return `${update.status} report of ${bytesOf(update)} bytes${parts.length > 0 ? ` (${parts.join(', ')})` : ''} is too large for the engine (HTTP 413)${reason}${runError}`;
}

/**
 * Creates a pull worker speaking the REST protocol (WIRE-PROTOCOL.md 3): registers each function
 * (`RegisterFunction`, `preferredMode: "EXECUTION_MODE_PULL"`, code hash in metadata), registers
 * itself, heartbeats, polls for jobs, acks fenced assignments before running user code, reports
 * progress checkpoints with `step_offset`, and ends each job with one `completed`, `failed` or
 * `yielded` update echoing the fence (retried on network errors and 5xx, replaced by a
 * `PAYLOAD_TOO_LARGE` failure on 413; see {@link Worker}). Nothing happens until `start()`.
 *
 * Throws `IronflowError` (`VALIDATION_ERROR`) for duplicate function ids or a bad
 * `maxConcurrentJobs`.
 */
export function createWorker(options: WorkerOptions): Worker {
  refuseUnknownOptions('createWorker', options, WORKER_OPTION_KEYS);
  return new PullWorker(options);
}
