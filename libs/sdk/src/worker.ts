import { WakeableSleeps } from './wakeable-sleeps';
import type { JobAckBody, JobAssignment, JobUpdateBody, WorkerHeartbeatBody, WorkerRegisterBody } from '@ironflow/contracts';
import { Checkpointer, MAX_STEPS_PER_CHECKPOINT } from './checkpointer';
import { IronflowClientError, IronflowError, errorMessage } from './errors';
import { executeInvocation } from './execute';
import { IronflowFunction, indexFunctions } from './function';
import { RawResponse, baseHeaders, connectUnary, httpError, parseJson, sendRaw } from './http';
import { REGISTER_FUNCTION_PROCEDURE, workerRegistrationBody } from './register-function';
import { SDK_VERSION, resolveApiKey, resolveEnvironment, resolveServerUrl } from './settings';
import { checkJobAssignment } from './wire-validation';

/** Where the worker reports what it does. Every method is optional except `warn` and `error`. */
export interface WorkerLogger {
  info?(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * Options of {@link createWorker}. Durations are in ms.
 * - `serverUrl`: default env `IRONFLOW_SERVER_URL`, else `http://localhost:9123`.
 * - `apiKey`: `Authorization: Bearer`; default env `IRONFLOW_API_KEY` (empty = unset).
 * - `functions`: the functions this worker runs (ids unique).
 * - `maxConcurrentJobs`: default 10.
 * - `environment`: `X-Ironflow-Environment`; default env `IRONFLOW_ENV`, else `"default"`.
 * - `heartbeatIntervalMs`: default 30000. `pollIntervalMs` (sleep after an empty poll or at
 *   capacity): default 1000. `checkpointIntervalMs` (progress debounce, 0 = off): default 1000.
 * - `labels`: reported at registration; default `{}`.
 * - `reconnectDelayMs` (after a failed registration): default 5000. `pollErrorDelayMs` (after a
 *   failed poll): default 5000. `requestTimeoutMs` (every HTTP call): default 30000.
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
  logger?: WorkerLogger;
}

/** A pull worker over REST (WIRE-PROTOCOL.md 3). */
export interface Worker {
  /** `worker-<base36 ms>-<6 base36 chars>`, fixed for the worker's life. */
  readonly workerId: string;
  /**
   * Starts registering, heartbeating and polling in the background. Resolves once the functions
   * and the worker are registered (retrying every `reconnectDelayMs` while the engine is
   * unreachable), or when the worker is stopped first. Rejects with {@link IronflowClientError}
   * (status 401/403) when the engine refuses the credentials; the worker is then stopped.
   * Rejects with `IronflowError` `WORKER_STOPPED` when called after `stop()`.
   */
  start(): Promise<void>;
  /**
   * Stops now: no more polls or heartbeats, timers cleared, active handlers' `signal` aborted.
   * An aborted job sends no terminal update unless its handler still returns normally (then
   * `completed` is sent). Resolves when the background loop has exited (it does not wait for
   * running handlers).
   */
  stop(): Promise<void>;
  /** Stops polling, waits for every active job to finish and report, then {@link stop}s. */
  drain(): Promise<void>;
}

type WorkerState = 'idle' | 'connecting' | 'connected' | 'draining' | 'stopped';

interface ActiveJob {
  startedAt: string;
  abort: AbortController;
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
  private readonly maxJobs: number;
  private readonly heartbeatMs: number;
  private readonly pollMs: number;
  private readonly checkpointMs: number;
  private readonly reconnectMs: number;
  private readonly pollErrorMs: number;
  private readonly timeoutMs: number;
  private readonly labels: Record<string, string>;
  private readonly log: WorkerLogger;

  private readonly active = new Map<string, ActiveJob>();
  private readonly idleWaiters: (() => void)[] = [];
  private readonly sleeps = new WakeableSleeps();
  private readonly pollAbort = new AbortController();
  private heartbeatTimer?: NodeJS.Timeout;
  private heartbeatInFlight = false;
  private loop?: Promise<void>;
  private startPromise?: Promise<void>;
  private settleStart?: { resolve: () => void; reject: (err: unknown) => void };

  constructor(options: WorkerOptions) {
    this.functions = indexFunctions(options.functions);
    this.baseUrl = resolveServerUrl(options.serverUrl);
    this.headers = baseHeaders(resolveApiKey(options.apiKey), resolveEnvironment(options.environment));
    this.maxJobs = options.maxConcurrentJobs ?? 10;
    if (!(Number.isInteger(this.maxJobs) && this.maxJobs >= 1)) throw new IronflowError('maxConcurrentJobs must be an integer >= 1', { code: 'VALIDATION_ERROR' });
    this.heartbeatMs = options.heartbeatIntervalMs ?? 30_000;
    this.pollMs = options.pollIntervalMs ?? 1_000;
    this.checkpointMs = options.checkpointIntervalMs ?? 1_000;
    this.reconnectMs = options.reconnectDelayMs ?? 5_000;
    this.pollErrorMs = options.pollErrorDelayMs ?? 5_000;
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.labels = { ...(options.labels ?? {}) };
    this.log = options.logger ?? defaultLogger;
  }

  start(): Promise<void> {
    if (this.state === 'stopped') return Promise.reject(new IronflowError('worker is stopped', { code: 'WORKER_STOPPED' }));
    if (this.startPromise) return this.startPromise;
    this.startPromise = new Promise<void>((resolve, reject) => (this.settleStart = { resolve, reject }));
    this.state = 'connecting';
    this.loop = this.run();
    return this.startPromise;
  }

  async stop(): Promise<void> {
    if (this.state !== 'stopped') {
      this.state = 'stopped';
      if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
      this.heartbeatTimer = undefined;
      this.pollAbort.abort();
      for (const job of this.active.values()) job.abort.abort();
      this.sleeps.wakeAll();
      this.settleStart?.resolve();
    }
    await this.loop;
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
        if (err instanceof IronflowClientError && isAuthStatus(err.status)) return this.refused(err);
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
    this.log.error('engine refused the credentials; worker stops', { worker_id: this.workerId, status: err.status, error: err.message });
    this.settleStart?.reject(err);
    this.settleStart = undefined;
    this.state = 'stopped';
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    for (const job of this.active.values()) job.abort.abort();
  }

  /** R1 for each function (in order), then R2. Throws IronflowClientError / network errors. */
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
  }

  private get workerPath(): string {
    return `/api/v1/workers/${encodeURIComponent(this.workerId)}`;
  }

  private call(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown, signal?: AbortSignal): Promise<RawResponse> {
    return sendRaw(`${this.baseUrl}${path}`, { method, headers: this.headers, body, signal, timeoutMs: this.timeoutMs });
  }

  private startHeartbeat(): void {
    if (this.heartbeatTimer || this.heartbeatMs <= 0) return;
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  /** R3; only while connected; errors are logged. */
  private async heartbeat(): Promise<void> {
    if (this.state !== 'connected' || this.heartbeatInFlight) return;
    this.heartbeatInFlight = true;
    const body: WorkerHeartbeatBody = {
      worker_id: this.workerId,
      active_jobs: this.active.size,
      jobs: [...this.active].map(([job_id, job]) => ({ job_id, started_at: job.startedAt })),
    };
    try {
      const res = await this.call('POST', `${this.workerPath}/heartbeat`, body);
      if (res.status < 200 || res.status >= 300) this.log.warn('heartbeat refused', { worker_id: this.workerId, status: res.status });
    } catch (err) {
      this.log.warn('heartbeat failed', { worker_id: this.workerId, error: errorMessage(err) });
    } finally {
      this.heartbeatInFlight = false;
    }
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
      const entryState: ActiveJob = { startedAt: new Date().toISOString(), abort: new AbortController() };
      this.active.set(job.job_id, entryState);
      started++;
      void this.runJob(job, entryState.abort.signal)
        .catch((err) => this.log.error('job crashed', { worker_id: this.workerId, job_id: job.job_id, run_id: job.run_id, error: errorMessage(err) }))
        .finally(() => {
          this.active.delete(job.job_id);
          if (this.active.size === 0) this.idleWaiters.splice(0).forEach((wake) => wake());
        });
    }
    return started;
  }

  /** One job: (fenced) ack R5 → handler with checkpoints → exactly one terminal R6. */
  private async runJob(job: JobAssignment, signal: AbortSignal): Promise<void> {
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
      await this.sendTerminal(job, { status: 'failed', error: { message: `function "${job.function_id}" is not served by this worker`, code: 'FUNCTION_NOT_FOUND', retryable: false }, ...fence }, fields);
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

    const checkpoints = new Checkpointer({
      intervalMs: this.checkpointMs,
      sequenceBase: job.step_sequence_base ?? 0,
      send: async (steps, stepOffset) => {
        const res = await this.call('PUT', this.jobPath(job), { status: 'progress', steps, step_offset: stepOffset, ...fence } satisfies JobUpdateBody);
        if (res.status < 200 || res.status >= 300) this.log.warn('checkpoint refused', { ...fields, status: res.status });
        return res.status;
      },
    });
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
    });
    await checkpoints.settle();

    let update: JobUpdateBody;
    if (outcome.status === 'completed') {
      await checkpoints.flushDownTo(MAX_STEPS_PER_CHECKPOINT);
      update = { status: 'completed' };
      if (outcome.result !== undefined) update.output = outcome.result;
      update.steps = checkpoints.unflushed;
      update.step_offset = checkpoints.stepOffset;
    } else if (signal.aborted) {
      this.log.info?.('job aborted by stop(); no terminal update', fields);
      return;
    } else if (outcome.status === 'failed') {
      await checkpoints.flushDownTo(MAX_STEPS_PER_CHECKPOINT);
      const { message, code, retryable } = outcome.error;
      update = { status: 'failed', error: { message, code, retryable } };
      const tail = checkpoints.unflushed;
      if (tail.length > 0) {
        update.steps = tail;
        update.step_offset = checkpoints.stepOffset;
      }
    } else {
      await checkpoints.flushDownTo(0);
      update = { status: 'yielded', yield: outcome.yield };
    }
    await this.sendTerminal(job, { ...update, ...fence }, fields);
  }

  private jobPath(job: JobAssignment): string {
    return `${this.workerPath}/jobs/${encodeURIComponent(job.job_id)}`;
  }

  /** R6 terminal: sent once, never retried; a refusal is only logged. */
  private async sendTerminal(job: JobAssignment, update: JobUpdateBody, fields: Record<string, unknown>): Promise<void> {
    try {
      const res = await this.call('PUT', this.jobPath(job), update);
      if (res.status < 200 || res.status >= 300) this.log.warn(`${update.status} update refused`, { ...fields, status: res.status, body: res.text.slice(0, 200) });
    } catch (err) {
      this.log.warn(`${update.status} update failed`, { ...fields, error: errorMessage(err) });
    }
  }

  private whenIdle(): Promise<void> {
    if (this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

/**
 * Creates a pull worker speaking the REST protocol (WIRE-PROTOCOL.md 3): registers each function
 * (`RegisterFunction`, `preferredMode: "EXECUTION_MODE_PULL"`, code hash in metadata), registers
 * itself, heartbeats, polls for jobs, acks fenced assignments before running user code, reports
 * progress checkpoints with `step_offset`, and ends each job with one `completed`, `failed` or
 * `yielded` update echoing the fence. Nothing happens until `start()`.
 *
 * Throws `IronflowError` (`VALIDATION_ERROR`) for duplicate function ids or a bad
 * `maxConcurrentJobs`.
 */
export function createWorker(options: WorkerOptions): Worker {
  return new PullWorker(options);
}
