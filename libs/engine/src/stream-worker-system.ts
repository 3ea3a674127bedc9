import { BusMessage, subjects } from '@ironflow/bus';
import { CallScope, EngineError, JobAssignment, RUN_ERROR_CODES, WorkerRegisterBody } from '@ironflow/contracts';
import { ExecutionFence, MISMATCHED_EXECUTION_SEQ, parseJobId } from '@ironflow/fencing';
import { RunRecord, leasesSql, runsSql, workersSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { DispatchSystem } from './dispatch-system';
import { PullWorkerSystem } from './pull-worker-system';
import { ReportSystem, SegmentReport } from './report-system';
import { EngineResources } from './resources';
import { ReleaseSystem } from './release-system';
import { Segment, toJobAssignment } from './segment-loader';

/** `heartbeat_interval_ms` the engine tells stream workers (WIRE-PROTOCOL.md 6). */
export const STREAM_HEARTBEAT_INTERVAL_MS = 30_000;
/** Silence after which a stream is ended as dead (DESIGN.md "Defaults": streaming heartbeat timeout). */
export const STREAM_HEARTBEAT_TIMEOUT_MS = 90_000;
/** `drain_timeout_ms` of the `shutdown` message, and the most the engine waits for it (DESIGN.md "Defaults"). */
export const STREAM_SHUTDOWN_DRAIN_MS = 25_000;

/** How many forgotten job ids (and run → latest execution entries) a connection remembers. */
const REMEMBERED_JOBS = 10_000;
/** An assignment never acked and missing from this many heartbeats was dropped by the worker. */
const UNACKED_MISSED_HEARTBEATS = 2;

/** Intervals of the stream transport, in ms. Every field is optional; defaults are the constants above. */
export interface StreamWorkerOptions {
  /** Told to each worker in `registered` (default 30000). */
  heartbeatIntervalMs?: number;
  /** A connection silent this long is ended and its jobs forgotten (default 90000). */
  heartbeatTimeoutMs?: number;
  /** `drain_timeout_ms` sent in `shutdown`, and the longest `stop()` waits for workers (default 25000). */
  shutdownDrainMs?: number;
}

/** The lease state the engine answers for one heartbeat segment (WIRE-PROTOCOL.md 4.5 `LeaseState`). */
export type StreamLeaseState = 'refreshed' | 'stale' | 'unknown';

export interface StreamSegmentLease {
  runId: string;
  executionSeq: number;
  state: StreamLeaseState;
}

/**
 * What the engine sends on a stream, transport-neutral (WIRE-PROTOCOL.md 4.3 `EngineMessage`).
 * `leaseExpiresAt` is ms since the epoch on the store clock (informational).
 */
export type StreamEngineMessage =
  | { kind: 'registered'; workerId: string; heartbeatIntervalMs: number }
  | { kind: 'job'; job: JobAssignment; leaseExpiresAt: number }
  | { kind: 'lease_refresh'; segments: StreamSegmentLease[] }
  | { kind: 'cancel'; jobId: string; reason: string }
  | { kind: 'shutdown'; reason: string; drainTimeoutMs: number };

/** The transport side of one stream: how the engine writes to it and ends it. */
export interface StreamSink {
  /** Queues one message; must not throw (a closed transport drops it). */
  send(message: StreamEngineMessage): void;
  /** Ends the stream from the engine's side (dead worker); the transport then calls `close()`. */
  end(reason: string): void;
  /**
   * The size `message` would have on the wire, in bytes (the protobuf encoding). The engine sends
   * no job assignment over `EngineConfig.streamMaxMessageBytes`; without this, none is measured.
   */
  encodedBytes?(message: StreamEngineMessage): number;
}

/**
 * A job a heartbeat lists (WIRE-PROTOCOL.md 4.4 `ActiveJob`). The v0.29 worker sends only
 * `jobId`; the Ironflow TS SDK also sends the fence.
 */
export interface StreamActiveJob {
  jobId: string;
  executionSeq?: number;
  leaseToken?: string;
}

/** The fence a worker message echoes; absent or empty token = no fence. */
export interface StreamFence {
  executionSeq?: number;
  leaseToken?: string;
}

/** What became of a report: committed (or a harmless repeat), dropped as stale, or not applicable. */
export type StreamReportVerdict = 'applied' | 'stale' | 'rejected';

/** A heartbeat entry with the fence the connection knows for it. */
type ListedJob = StreamActiveJob & { forgotten?: boolean };

interface TrackedJob {
  jobId: string;
  runId: string;
  executionSeq: number;
  leaseToken: string;
  acked: boolean;
  /** Heartbeats since delivery that did not list this (still unacked) job. */
  missed: number;
}

/**
 * One worker's stream (WIRE-PROTOCOL.md 4.7), as the transport drives it: call the methods in the
 * order the worker's messages arrive, one at a time (each returns once handled), and `close()`
 * when the stream ends. The connection tracks the jobs delivered on it until their report, a
 * redelivery, a drop or the stream's end; tracked jobs count against `max_concurrent_jobs`.
 */
export class StreamConnection {
  private readonly jobs = new Map<string, TrackedJob>();
  private readonly jobOfRun = new Map<string, string>();
  /** Job ids this connection stopped tracking, and why (bounded, oldest dropped first). */
  private readonly forgotten = new Map<string, string>();
  /** The newest execution of each run delivered here (bounded like `forgotten`). */
  private readonly latestSeq = new Map<string, number>();
  private closedFlag = false;
  /** True after `shutdown` was sent: no more assignments. */
  draining = false;
  /** `Date.now()` of the last message from the worker. */
  lastSeenAt = Date.now();

  constructor(
    private readonly system: StreamWorkerSystem,
    readonly workerId: string,
    readonly project: string,
    readonly env: string,
    readonly functionIds: readonly string[],
    readonly maxConcurrentJobs: number,
    private readonly sink: StreamSink,
  ) {}

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Jobs delivered here and not yet reported, superseded or dropped. */
  get trackedJobs(): number {
    return this.jobs.size;
  }

  /** Free slots: `max_concurrent_jobs` − tracked jobs (never negative). */
  get room(): number {
    return Math.max(0, this.maxConcurrentJobs - this.jobs.size);
  }

  /** Writes to the worker unless the stream is closed. */
  send(message: StreamEngineMessage): void {
    if (!this.closedFlag) this.sink.send(message);
  }

  /** Ends the stream from the engine's side; the transport calls `close()` after. */
  end(reason: string): void {
    if (!this.closedFlag) this.sink.end(reason);
    this.close();
  }

  /**
   * The stream ended: its jobs are forgotten. With `release` (default: the worker closed the stream,
   * stopped, or the connection broke or went silent) the jobs it still held are given back at once
   * (`ReleaseSystem`, off the transport's path), so another worker runs them without waiting for
   * their leases to expire. Without it (the engine is shutting down, or ended the stream over a
   * message it could not read) their leases are kept: a worker that reconnects elsewhere goes on
   * with them (adoption), and its reports are judged by their fences. Idempotent.
   */
  close(release = true): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    const held = [...this.jobs.values()];
    this.jobs.clear();
    this.jobOfRun.clear();
    this.system.detach(this, release ? held : []);
  }

  /**
   * Pushes a claimed segment to the worker. A tracked earlier execution of the same run is
   * superseded: forgotten here, and the worker gets `cancel` for it, so its late report is
   * dropped as stale. An assignment that would encode over `maxMessageBytes` is not sent (the
   * worker could not read it, and the stream would break): answers `false` and sends nothing.
   */
  deliver(segment: Segment, leaseExpiresAt: number, maxMessageBytes: number): boolean {
    const job = toJobAssignment(segment);
    const message: StreamEngineMessage = { kind: 'job', job, leaseExpiresAt };
    if ((this.sink.encodedBytes?.(message) ?? 0) > maxMessageBytes) return false;
    const { run } = segment;
    const previous = this.jobOfRun.get(run.id);
    if (previous !== undefined) {
      this.forget(previous, `superseded by execution ${run.executionSeq}`);
      this.send({ kind: 'cancel', jobId: previous, reason: `superseded by execution ${run.executionSeq} of run ${run.id}` });
    }
    remember(this.latestSeq, run.id, Math.max(run.executionSeq, this.latestSeq.get(run.id) ?? 0));
    this.jobs.set(job.job_id, { jobId: job.job_id, runId: run.id, executionSeq: run.executionSeq, leaseToken: run.leaseToken ?? '', acked: false, missed: 0 });
    this.jobOfRun.set(run.id, job.job_id);
    this.send(message);
    return true;
  }

  /**
   * `job_ack`: the worker runs the job. In memory only (the claim already wrote the lease for
   * this worker). An ack of a job this connection forgot gets `cancel`, so the worker stops it.
   */
  ack(jobId: string): void {
    this.lastSeenAt = Date.now();
    const tracked = this.jobs.get(jobId);
    if (tracked) tracked.acked = true;
    else if (this.forgotten.has(jobId)) this.send({ kind: 'cancel', jobId, reason: `job ${jobId} is no longer live (${this.forgotten.get(jobId)})` });
  }

  /**
   * The run `runId` was cancelled (a user cancel, a `cancel_on` match, a cancelled parent): the job
   * of it this connection tracks, if any, is forgotten and the worker gets `cancel` (WIRE-PROTOCOL.md
   * 4.3 `CancelJob`) now rather than at its next heartbeat; a late report of it is dropped as stale.
   * Answers whether the connection held such a job (its room grew).
   */
  cancelRun(runId: string): boolean {
    const jobId = this.jobOfRun.get(runId);
    if (jobId === undefined) return false;
    this.forget(jobId, 'run cancelled');
    this.send({ kind: 'cancel', jobId, reason: `run ${runId} was cancelled` });
    return true;
  }

  /**
   * A heartbeat (WIRE-PROTOCOL.md 4.7): refreshes the leases of the listed jobs in one unit of
   * work and answers `lease_refresh` with one state per listed segment:
   * - `refreshed`: the execution is live and its lease now runs `leaseMs` from the store's now.
   *   A listed job this connection never delivered (a reconnected worker still running it) is
   *   adopted and tracked from now on.
   * - `stale`: the run exists but the execution is no longer live; the worker also gets
   *   `cancel` for it and the connection forgets it.
   * - `unknown`: no such run, or not a job id the engine issues.
   * Jobs with a fence are checked against it; v0.29 heartbeats carry only `job_id`, so those are
   * checked against the fence this connection delivered, else against the run's live execution.
   *
   * A tracked job that was acked and is missing from the heartbeat with no report ended without
   * one: the v0.29 worker does that when it yields. Its run fails at once, non-retryable, with
   * `STREAM_YIELD_UNSUPPORTED` (a fenced failure through `ReportSystem.apply`). An unacked job
   * missing from two heartbeats was dropped by the worker (e.g. at capacity): it is forgotten and
   * its lease left to expire.
   */
  async heartbeat(listed: readonly StreamActiveJob[]): Promise<StreamSegmentLease[]> {
    this.lastSeenAt = Date.now();
    const listedIds = new Set(listed.map((j) => j.jobId));
    const yieldedWithoutReport: TrackedJob[] = [];
    for (const job of [...this.jobs.values()]) {
      if (listedIds.has(job.jobId)) continue;
      if (job.acked) {
        this.forget(job.jobId, 'left the worker without a report');
        yieldedWithoutReport.push(job);
      } else if (++job.missed >= UNACKED_MISSED_HEARTBEATS) {
        this.forget(job.jobId, 'never acked');
      }
    }
    const segments = await this.system.refreshListed(this, listed.map((j) => this.withKnownFence(j)));
    for (const [i, segment] of segments.entries()) {
      const jobId = listed[i].jobId;
      if (segment.state === 'refreshed') {
        if (!this.jobs.has(jobId)) this.adopt(jobId, segment);
      } else {
        this.forget(jobId, segment.state === 'stale' ? 'lease no longer live' : 'unknown to the engine');
        this.send({ kind: 'cancel', jobId, reason: `job ${jobId} is not a live execution (${segment.state})` });
      }
    }
    for (const job of yieldedWithoutReport) await this.system.failYieldedWithoutReport(this, job);
    if (yieldedWithoutReport.length > 0) this.system.wake();
    // Answered last, so the worker's view after the answer includes the failures above.
    const answer = segments.filter((s) => s.runId !== '').map(({ runId, executionSeq, state }) => ({ runId, executionSeq, state }));
    this.send({ kind: 'lease_refresh', segments: answer });
    return answer;
  }

  /**
   * `job_completed` / `job_failed` / `job_yielded` (and ours with steps). Dropped and counted in
   * `ironflow_capacity_stale_mutations_rejected_total`, changing nothing, when the job is one this
   * connection no longer tracks (already reported, superseded by a redelivery, dropped), when it
   * names an earlier execution of a run delivered here again, when it is not a job id, or when
   * `ReportSystem.apply` finds its execution no longer live (`STALE_EXECUTION`,
   * `RUN_NOT_RUNNING`). A job never delivered on this connection (a reconnected worker's) is
   * judged by its fence alone. A report the engine cannot apply (`VALIDATION_ERROR`,
   * `PAYLOAD_TOO_LARGE`) fails the attempt instead: retryable with code `REPORT_REJECTED`,
   * or, too large, not retryable with code `PAYLOAD_TOO_LARGE` (`ReportSystem.apply`).
   */
  async report(jobId: string, fence: StreamFence, report: SegmentReport): Promise<StreamReportVerdict> {
    this.lastSeenAt = Date.now();
    let id: { runId: string; executionSeq: number };
    try {
      id = parseJobId(jobId);
    } catch {
      return this.system.dropStale(this, jobId, 'not a job id');
    }
    const tracked = this.jobs.get(jobId);
    if (!tracked) {
      if (this.forgotten.has(jobId)) return this.system.dropStale(this, jobId, this.forgotten.get(jobId)!);
      if ((this.latestSeq.get(id.runId) ?? 0) > id.executionSeq) return this.system.dropStale(this, jobId, 'a later execution was delivered');
    } else {
      this.forget(jobId, 'reported');
      this.system.wake();
    }
    return this.system.applyReport(this, id.runId, reportFence(fence, id.executionSeq), report, jobId);
  }

  /**
   * The v0.29 heartbeat carries no fence: use the one this connection delivered. A job this
   * connection forgot is never refreshed (it is answered `stale`).
   */
  private withKnownFence(job: StreamActiveJob): ListedJob {
    if (this.forgotten.has(job.jobId) && !this.jobs.has(job.jobId)) return { ...job, forgotten: true };
    if (job.leaseToken) return job;
    const tracked = this.jobs.get(job.jobId);
    return tracked ? { jobId: job.jobId, executionSeq: tracked.executionSeq, leaseToken: tracked.leaseToken } : job;
  }

  private adopt(jobId: string, segment: StreamSegmentLease & { leaseToken?: string }): void {
    if (this.jobOfRun.has(segment.runId)) return;
    this.jobs.set(jobId, { jobId, runId: segment.runId, executionSeq: segment.executionSeq, leaseToken: segment.leaseToken ?? '', acked: true, missed: 0 });
    this.jobOfRun.set(segment.runId, jobId);
    remember(this.latestSeq, segment.runId, Math.max(segment.executionSeq, this.latestSeq.get(segment.runId) ?? 0));
  }

  private forget(jobId: string, why: string): void {
    const job = this.jobs.get(jobId);
    if (job) {
      this.jobs.delete(jobId);
      if (this.jobOfRun.get(job.runId) === jobId) this.jobOfRun.delete(job.runId);
    }
    remember(this.forgotten, jobId, why);
  }
}

/**
 * Streaming pull workers (WIRE-PROTOCOL.md section 4, DESIGN.md "Wire protocols"), independent of
 * the RPC transport: the dispatcher's `WorkerService.Connect` handler opens one
 * {@link StreamConnection} per stream and feeds it the worker's messages.
 *
 * - Delivery: while any stream is open, one loop claims pull segments for each connection with
 *   room (`DispatchSystem.claim` for its functions, project and env, at most
 *   `min(room, maxJobsPerPoll)` at a time) and pushes them as `job`. It wakes on pull dispatch
 *   hints, on freed room and every `dispatchPollMs`.
 * - Reports go through `ReportSystem.apply(runId, fence, report)`; see
 *   {@link StreamConnection.report} for what is dropped as stale.
 * - Cancels: while any stream is open, the system listens to the runs' `cancelled` run events
 *   (`public.{env}.system.run.{id}.cancelled`, published by whichever node cancelled) and sends
 *   `cancel` at once on the stream that holds a job of that run ({@link StreamConnection.cancelRun}).
 *   The event is best effort: a lost one leaves the cancel to the worker's next heartbeat.
 * - `stop()` stops assigning, sends `shutdown` (drain `shutdownDrainMs`) to every stream and waits
 *   until their jobs are reported or the drain passes.
 */
export class StreamWorkerSystem {
  private readonly connections = new Set<StreamConnection>();
  private readonly options: Required<StreamWorkerOptions>;
  private loop?: Promise<void>;
  private stopping?: Promise<void>;
  private wakeUp?: () => void;
  private woken = false;
  private unsubscribe?: () => void;
  private drainWaiters: (() => void)[] = [];

  constructor(
    private readonly r: EngineResources,
    private readonly dispatch: DispatchSystem,
    private readonly reports: ReportSystem,
    private readonly pull: PullWorkerSystem,
    private readonly hints: DispatchHints,
    private readonly releases: ReleaseSystem,
    options: StreamWorkerOptions = {},
  ) {
    this.options = {
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? STREAM_HEARTBEAT_INTERVAL_MS,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? STREAM_HEARTBEAT_TIMEOUT_MS,
      shutdownDrainMs: options.shutdownDrainMs ?? STREAM_SHUTDOWN_DRAIN_MS,
    };
  }

  /** Open streams. */
  get connectionCount(): number {
    return this.connections.size;
  }

  /**
   * A stream's first message, `register`: validates and stores the worker like a REST
   * registration (id of letters, digits, `_`, `-`; `max_concurrent_jobs` 1..10000, default 10;
   * env from the scope, else `labels.env`), answers `registered` with the heartbeat interval and
   * starts assigning. A stream opened after `stop()` began gets `registered` then `shutdown`, and
   * no jobs. Throws `EngineError` `VALIDATION_ERROR` for a bad registration (the transport ends
   * the stream with it); nothing is stored then.
   */
  async open(scope: CallScope, registration: WorkerRegisterBody, sink: StreamSink): Promise<StreamConnection> {
    const workerId = registration?.worker_id ?? '';
    await this.pull.register(scope, workerId, registration);
    const worker = await this.r.store.read('getWorker', (tx) => workersSql.getWorker(tx, workerId));
    if (!worker) throw new EngineError('WORKER_NOT_FOUND', `worker ${workerId} is not registered`);
    const conn = new StreamConnection(this, worker.id, worker.project, worker.env, worker.functionIds, worker.maxConcurrentJobs, sink);
    conn.send({ kind: 'registered', workerId: worker.id, heartbeatIntervalMs: this.options.heartbeatIntervalMs });
    if (this.stopping) {
      conn.draining = true;
      conn.send({ kind: 'shutdown', reason: 'engine is shutting down', drainTimeoutMs: this.options.shutdownDrainMs });
    }
    this.connections.add(conn);
    this.startLoop();
    this.wake();
    return conn;
  }

  /**
   * Engine shutdown: stops assigning, sends `shutdown` (`drain_timeout_ms` = `shutdownDrainMs`)
   * to every stream, then waits until every stream has no tracked job or has closed, at most
   * `min(drainMs, shutdownDrainMs)` ms. Streams stay open (the listener closes them). Idempotent.
   */
  stop(drainMs = this.options.shutdownDrainMs): Promise<void> {
    this.stopping ??= (async () => {
      this.unsubscribe?.();
      this.wake();
      await this.loop;
      for (const conn of this.connections) {
        conn.draining = true;
        conn.send({ kind: 'shutdown', reason: 'engine is shutting down', drainTimeoutMs: this.options.shutdownDrainMs });
      }
      await this.drained(Math.min(drainMs, this.options.shutdownDrainMs));
    })();
    return this.stopping;
  }

  /** Wakes the delivery loop (new room, a hint). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
    this.notifyDrain();
  }

  /** @internal A connection closed; `released` are the jobs it gives back (none while the engine stops). */
  detach(conn: StreamConnection, released: readonly TrackedJob[]): void {
    this.connections.delete(conn);
    this.notifyDrain();
    if (released.length === 0 || this.stopping) return;
    this.r.followUps.track('stream-release', async () => {
      const count = await this.releases.releaseAll(conn.workerId, released, `stream of worker ${conn.workerId} closed`);
      if (count > 0) this.r.logger.log('closed stream released its jobs', { worker_id: conn.workerId, released: count });
    });
  }

  /** @internal Drops a stale report: nothing changes, the metric counts it. */
  dropStale(conn: StreamConnection, jobId: string, why: string): StreamReportVerdict {
    this.r.metrics.staleMutationsRejected.inc();
    this.r.logger.log('stale stream report dropped', { worker_id: conn.workerId, job_id: jobId, reason: why });
    return 'stale';
  }

  /** @internal Applies one report; see {@link StreamConnection.report}. */
  async applyReport(conn: StreamConnection, runId: string, fence: ExecutionFence | undefined, report: SegmentReport, jobId: string): Promise<StreamReportVerdict> {
    try {
      await this.reports.apply(runId, fence, report);
      return 'applied';
    } catch (err) {
      if (err instanceof EngineError && (err.code === 'STALE_EXECUTION' || err.code === 'RUN_NOT_RUNNING')) return this.dropStale(conn, jobId, err.message);
      // A report the engine cannot apply already failed its attempt in `apply` (REPORT_REJECTED / PAYLOAD_TOO_LARGE).
      this.r.logger.warn('stream report not applied', { worker_id: conn.workerId, job_id: jobId, run_id: runId, error: String(err) });
      return 'rejected';
    }
  }

  /**
   * A claimed segment whose assignment is over the stream's message limit: no worker could read
   * it, so its attempt fails at once, not retryable, with `PAYLOAD_TOO_LARGE` (a fenced failure
   * through `ReportSystem.apply`), instead of breaking the stream and waiting for lease recovery.
   */
  private async failTooLarge(conn: StreamConnection, segment: Segment): Promise<void> {
    const { run } = segment;
    const error = {
      message: `the job assignment of execution ${run.executionSeq} is over the stream's ${this.r.config.streamMaxMessageBytes}-byte message limit (event data and memoized step outputs)`,
      code: RUN_ERROR_CODES.PAYLOAD_TOO_LARGE,
      retryable: false,
    };
    this.r.logger.warn('stream job assignment over the message limit; attempt failed', { worker_id: conn.workerId, run_id: run.id, execution_seq: run.executionSeq });
    try {
      await this.reports.apply(run.id, { executionSeq: run.executionSeq, leaseToken: run.leaseToken ?? '' }, { kind: 'failed', error, byEngine: true });
    } catch (err) {
      // The execution already ended or moved on (a cancel): its lease is gone or expires.
      this.r.logger.log('oversized stream job not failed', { worker_id: conn.workerId, run_id: run.id, error: String(err) });
    }
  }

  /** @internal The v0.29 yield: an acked job left the worker without a report. */
  async failYieldedWithoutReport(conn: StreamConnection, job: TrackedJob): Promise<void> {
    const error = {
      message: `stream worker ${conn.workerId} dropped job ${job.jobId} without a report; a streaming worker that cannot report yields cannot run past a wait (sleep, waitForEvent, invoke)`,
      code: RUN_ERROR_CODES.STREAM_YIELD_UNSUPPORTED,
      retryable: false,
    };
    try {
      await this.reports.apply(job.runId, { executionSeq: job.executionSeq, leaseToken: job.leaseToken }, { kind: 'failed', error, byEngine: true });
    } catch (err) {
      // The execution already ended or moved on (a report that raced the heartbeat, a cancel): nothing to fail.
      this.r.logger.log('dropped stream job not failed', { worker_id: conn.workerId, job_id: job.jobId, run_id: job.runId, error: String(err) });
    }
  }

  /**
   * @internal One unit of work for a heartbeat: touches the worker row, reads the listed runs in
   * one query and refreshes each live lease (see {@link StreamConnection.heartbeat}). The
   * answer is in the order of `listed`; a segment that is not a job id has `runId` "".
   */
  async refreshListed(conn: StreamConnection, listed: readonly ListedJob[]): Promise<(StreamSegmentLease & { leaseToken?: string })[]> {
    const parsed = listed.map((job) => {
      try {
        return { job, ...parseJobId(job.jobId) };
      } catch {
        return { job, runId: '', executionSeq: 0 };
      }
    });
    return this.r.store.unitOfWork('streamHeartbeat', async (tx) => {
      await workersSql.touchWorker(tx, conn.workerId);
      const ids = [...new Set(parsed.filter((p) => p.runId !== '').map((p) => p.runId))];
      const runs = new Map((await runsSql.getRuns(tx, ids)).map((run) => [run.id, run]));
      const answer: (StreamSegmentLease & { leaseToken?: string })[] = [];
      for (const { job, runId, executionSeq } of parsed) {
        const run = runs.get(runId);
        if (!run) {
          answer.push({ runId, executionSeq, state: 'unknown' });
          continue;
        }
        const live = !job.forgotten && isLive(run, executionSeq, job.leaseToken) && (await leasesSql.refreshLease(tx, runId, executionSeq, tx.now + this.r.config.leaseMs, conn.workerId));
        answer.push({ runId, executionSeq, state: live ? 'refreshed' : 'stale', ...(live ? { leaseToken: run.leaseToken ?? '' } : {}) });
      }
      return answer;
    });
  }

  private startLoop(): void {
    if (this.loop || this.stopping) return;
    const unsubscribeHints = this.hints.onQueued('pull', () => this.wake());
    const cancels = this.r.bus.subscribe(subjects.runEvent('*', '*', 'cancelled'), (message) => this.cancelled(message));
    this.unsubscribe = () => {
      unsubscribeHints();
      cancels.unsubscribe();
    };
    this.loop = this.run();
  }

  /** A `cancelled` run event: the stream of its env holding a job of the run cancels it (see the class doc). */
  private cancelled(message: BusMessage): void {
    const runId = (message.data as { runId?: unknown } | null)?.runId;
    if (typeof runId !== 'string') return;
    const env = message.subject.split('.')[1];
    for (const conn of this.connections) {
      if (conn.env === env && conn.cancelRun(runId)) this.wake();
    }
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      this.woken = false;
      let delivered = 0;
      for (const conn of [...this.connections]) {
        if (this.stopping) break;
        if (Date.now() - conn.lastSeenAt > this.options.heartbeatTimeoutMs) {
          this.r.logger.warn('stream worker silent past the heartbeat timeout; stream ended', { worker_id: conn.workerId });
          conn.end(`no message for ${this.options.heartbeatTimeoutMs} ms`);
          continue;
        }
        delivered += await this.deliverTo(conn);
      }
      if (delivered === 0 && !this.woken && !this.stopping) await this.idle();
    }
  }

  /** Claims up to the connection's room and pushes each segment. Returns how many it pushed. */
  private async deliverTo(conn: StreamConnection): Promise<number> {
    const limit = Math.min(conn.room, this.r.config.maxJobsPerPoll);
    if (conn.closed || conn.draining || limit <= 0 || conn.functionIds.length === 0) return 0;
    try {
      const segments = await this.dispatch.claim({ mode: 'pull', limit, project: conn.project, env: conn.env, functionIds: [...conn.functionIds] }, conn.workerId);
      // Claimed for a stream that closed meanwhile: the leases expire and recovery queues them again.
      const leaseExpiresAt = this.r.clock.now() + this.r.config.leaseMs;
      for (const segment of segments) {
        if (!conn.deliver(segment, leaseExpiresAt, this.r.config.streamMaxMessageBytes)) await this.failTooLarge(conn, segment);
      }
      return segments.length;
    } catch (err) {
      this.r.logger.warn('stream claim failed; retrying after the poll period', { worker_id: conn.workerId, error: String(err) });
      return 0;
    }
  }

  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.r.config.dispatchPollMs);
      this.wakeUp = done;
    });
  }

  private drained(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if ([...this.connections].every((c) => c.closed || c.trackedJobs === 0)) finish();
      };
      const finish = () => {
        clearTimeout(timer);
        this.drainWaiters = this.drainWaiters.filter((w) => w !== check);
        resolve();
      };
      const timer = setTimeout(finish, timeoutMs);
      this.drainWaiters.push(check);
      check();
    });
  }

  private notifyDrain(): void {
    for (const check of [...this.drainWaiters]) check();
  }
}

/** The execution `executionSeq` is the run's live one (and `leaseToken`, when given, is its token). */
function isLive(run: RunRecord, executionSeq: number, leaseToken: string | undefined): boolean {
  if (run.status !== 'running' || run.executionSeq !== executionSeq || !run.leaseToken) return false;
  return !leaseToken || leaseToken === run.leaseToken;
}

/** A report's fence: its token with the job id's execution; a different `execution_seq` never matches. */
function reportFence(fence: StreamFence, jobSeq: number): ExecutionFence | undefined {
  if (!fence.leaseToken) return undefined;
  if (fence.executionSeq !== undefined && fence.executionSeq !== 0 && fence.executionSeq !== jobSeq) return { executionSeq: MISMATCHED_EXECUTION_SEQ, leaseToken: fence.leaseToken };
  return { executionSeq: jobSeq, leaseToken: fence.leaseToken };
}

/** Sets `key` as the newest entry of a bounded map, dropping the oldest past {@link REMEMBERED_JOBS}. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > REMEMBERED_JOBS) map.delete(map.keys().next().value as string);
}
