import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { AUDIT_EVENT_TYPES, EXECUTION_MODES, ExecutionMode, TERMINAL_RUN_STATUSES } from '@ironflow/contracts';
import { memoizedSample } from './memoized-sample';

/** What the capacity scanner samples at scrape time (see {@link EngineMetrics.exportBacklog}). */
export interface BacklogSample {
  /** Per mode: runs ready to be claimed, and the store time (ms) the oldest of them became ready. */
  queued: { mode: ExecutionMode; count: number; oldestAvailableAt: number | null }[];
  /** Registered workers (pull and stream) seen within the lease. */
  activeWorkers: number;
  /** The store clock when the sample was read (ms). */
  now: number;
}

/** How long a scrape waits for a backlog sample before it answers with the last one. */
const BACKLOG_SAMPLE_DEADLINE_MS = 5000;
/** Scrapes within this of a sample reuse it (one query for the three backlog gauges). */
const BACKLOG_SAMPLE_REUSE_MS = 1000;
/**
 * How often the default metrics sample the event loop's delay (`nodejs_eventloop_lag_*`), ms.
 * prom-client's default, 10 ms, wakes every process 100 times a second whatever it does, which
 * cost an idle service 5–9 ms of CPU a second (issue 11: a cluster of five services pays it five
 * times, about 0.3 ms per run at 150 runs/s); at 100 ms a stall longer than that is still seen.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * Every metric the engine defines, on one registry per process (registering a metric twice
 * throws, so `ironflow dev` shares one instance across its five service modules).
 */
export class EngineMetrics {
  readonly registry = new Registry();
  readonly runsCreated = new Counter({ name: 'ironflow_runs_created_total', help: 'Runs created', labelNames: ['function_id'], registers: [this.registry] });
  readonly runOutcomes = new Counter({ name: 'ironflow_run_outcomes_total', help: 'Committed run outcomes', labelNames: ['status'], registers: [this.registry] });
  readonly reportsRejected = new Counter({ name: 'ironflow_reports_rejected_total', help: 'Worker reports rejected by the fence', labelNames: ['code'], registers: [this.registry] });
  readonly retriesScheduled = new Counter({ name: 'ironflow_run_retries_total', help: 'Attempts re-queued after a retryable failure', registers: [this.registry] });
  readonly segmentsDispatched = new Counter({ name: 'ironflow_segments_dispatched_total', help: 'Segments claimed for execution', labelNames: ['mode'], registers: [this.registry] });
  readonly pushLatency = new Histogram({ name: 'ironflow_push_call_seconds', help: 'Push invocation round trip', buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30], registers: [this.registry] });
  /**
   * Sync triggers a node that does not dispatch push (the api-gateway) handed to a dispatcher, by
   * result: `answered` (a dispatcher ran it, or threw an `EngineError`), `busy` (no push slot freed in time, or the dispatcher's push dispatch stopped),
   * `no_responders` (no dispatcher subscribed), `failed` (no answer in time, or the dispatcher's
   * trigger failed otherwise). Every result but `answered` is triggered by the gateway itself.
   */
  readonly triggerForwards = new Counter({ name: 'ironflow_trigger_forwards_total', help: 'Sync triggers handed to a dispatcher to claim at trigger, by result (answered, busy, no_responders, failed: all but answered are triggered by the gateway itself)', labelNames: ['result'], registers: [this.registry] });
  readonly parentWakes = new Counter({ name: 'ironflow_parent_wakes_total', help: 'Parent wakes applied', labelNames: ['path'], registers: [this.registry] });

  readonly resultPublishFailures = new Counter({ name: 'ironflow_run_result_publish_failures_total', help: 'RESULTS frames that could not be published (the caller still sees success)', registers: [this.registry] });
  readonly runEventPublishFailures = new Counter({ name: 'ironflow_run_event_publish_failures_total', help: 'Run and step events that could not be published (kept in dead_letters without payload)', labelNames: ['event'], registers: [this.registry] });
  readonly followUpAttempts = new Counter({ name: 'ironflow_follow_up_attempts_total', help: 'Post-commit follow-ups started', labelNames: ['kind'], registers: [this.registry] });
  readonly followUpFailures = new Counter({ name: 'ironflow_follow_up_failures_total', help: 'Post-commit follow-ups that failed', labelNames: ['kind'], registers: [this.registry] });
  readonly followUpLatency = new Histogram({ name: 'ironflow_follow_up_seconds', help: 'Post-commit follow-up duration', labelNames: ['kind'], buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], registers: [this.registry] });
  readonly auditWriteFailures = new Counter({ name: 'ironflow_audit_write_failures_total', help: 'Audit rows lost (backlog, budget, stop, a failed insert or a failed recording lookup); every row is stored or counted once', labelNames: ['event_type'], registers: [this.registry] });
  readonly auditUnansweredRows = new Counter({ name: 'ironflow_audit_unanswered_rows_total', help: 'Audit rows whose write got no answer from the audit-writer, by what the sender then learned: written (stored, not counted as lost), given_up (counted as lost), unknown (counted as lost, may be stored)', labelNames: ['fate'], registers: [this.registry] });
  /** Audit write requests sent again because no audit-writer answered (NATS no responders), within the rows' budget (`NatsAuditSink`). */
  readonly auditWriteRetries = new Counter({ name: 'ironflow_audit_write_retries_total', help: 'Audit write requests sent again because no audit-writer answered (no responders, e.g. while one restarts), within the 5 s budget of their rows', registers: [this.registry] });
  readonly leaseRecoveries = new Counter({ name: 'ironflow_lease_recoveries_total', help: 'Expired leases recovered by the capacity scanner; exhausted also counts runs failed by a release past the recovery ceiling', labelNames: ['effect'], registers: [this.registry] });
  /** How far the `cancel_on` reconcile's cursor is behind the settled end of the event log (0 once a pass reached it); set by the scheduler. */
  readonly cancelOnReconcileLag = new Gauge({ name: 'ironflow_cancel_on_reconcile_lag_seconds', help: 'How far the cancel_on reconcile pass is behind the event log after its last pass, seconds (0: caught up)', registers: [this.registry] });
  readonly cancelOnExpressionErrors = new Counter({ name: 'ironflow_cancel_on_expression_errors_total', help: 'cancelOn `if` conditions that failed on an event (that spec did not cancel the run)', labelNames: ['function_id'], registers: [this.registry] });
  readonly triggerExpressionErrors = new Counter({ name: 'ironflow_trigger_expression_errors_total', help: 'Trigger expressions that failed on an event (no run was started for that trigger)', labelNames: ['function_id'], registers: [this.registry] });
  readonly staleMutationsRejected = new Counter({ name: 'ironflow_capacity_stale_mutations_rejected_total', help: 'Reports dropped because their execution is no longer live', registers: [this.registry] });

  /**
   * A unit of work that commits outcomes (a report, a cancel, a lease recovery, a step timeout, a
   * parent wake failing its parent) ended with an error instead of committing: the run did not
   * end; its writer retries or a pass comes back. By store unit name.
   */
  readonly outcomeCommitErrors = new Counter({ name: 'ironflow_outcome_commit_errors_total', help: 'Units of work that commit run outcomes and failed with an error (nothing committed; retried by the reporter or the next pass)', labelNames: ['unit'], registers: [this.registry] });
  /** Every HTTP request (REST, Connect JSON on HTTP/1.1, gRPC and Connect on h2c), by route template. */
  readonly httpRequestDuration = new Histogram({ name: 'ironflow_http_request_duration_seconds', help: 'HTTP request duration by route template (REST) or RPC path, method and status', labelNames: ['route', 'method', 'status'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: [this.registry] });
  /** Open `WorkerService.Connect` streams on this process (0 outside dispatchers); set by the engine. */
  readonly streamConnections: Gauge = new Gauge({ name: 'ironflow_stream_connections', help: 'Open WorkerService streams on this process', registers: [this.registry], collect: () => this.streamConnections.set(this.streamConnectionCount()) });
  private streamConnectionCount: () => number = () => 0;
  /**
   * Audit rows and recording lookups waiting or being written in this process (the recorder's
   * `inFlight`; set by the engine): what a crash of the process can lose without counting it. A
   * row the writer stored whose answer had not come back yet is in it too, so it bounds that loss.
   */
  readonly auditPending: Gauge = new Gauge({ name: 'ironflow_audit_rows_pending', help: 'Audit rows and recording lookups waiting or being written in this process (lost uncounted if it crashes)', registers: [this.registry], collect: () => this.auditPending.set(this.auditPendingCount()) });
  private auditPendingCount: () => number = () => 0;
  private backlogExported = false;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    // Label values known in advance start at 0, so a dashboard shows 0 rather than "No data".
    for (const eventType of AUDIT_EVENT_TYPES) this.auditWriteFailures.inc({ event_type: eventType }, 0);
    for (const status of TERMINAL_RUN_STATUSES) {
      this.runOutcomes.inc({ status }, 0);
      this.runEventPublishFailures.inc({ event: status }, 0);
    }
    for (const mode of EXECUTION_MODES) this.segmentsDispatched.inc({ mode }, 0);
    for (const effect of ['requeued', 'exhausted', 'released']) this.leaseRecoveries.inc({ effect }, 0);
    for (const fate of ['written', 'given_up', 'unknown']) this.auditUnansweredRows.inc({ fate }, 0);
    for (const path of ['commit', 'pass']) this.parentWakes.inc({ path }, 0);
    for (const result of ['answered', 'busy', 'no_responders', 'failed']) this.triggerForwards.inc({ result }, 0);
    for (const code of ['STALE_EXECUTION', 'RUN_NOT_RUNNING']) this.reportsRejected.inc({ code }, 0);
  }

  /** Where {@link streamConnections} reads its value at scrape time. */
  countStreamConnections(count: () => number): void {
    this.streamConnectionCount = count;
  }

  /** Where `ironflow_audit_rows_pending` reads its value (the engine's audit recorder). */
  countAuditPending(count: () => number): void {
    this.auditPendingCount = count;
  }

  /**
   * Registers the backlog gauges, read from `sample` at scrape time (the capacity scanner calls
   * this once, so one service kind exports them and a cluster's value is one query, not one per
   * process): `ironflow_queued_runs{mode}`, `ironflow_oldest_queued_run_age_seconds{mode}` (0 when
   * nothing is queued) and `ironflow_workers_active`. A sample is reused for 1 s across the three
   * gauges; a sample that fails or takes over 5 s leaves the last values. Calling it again does
   * nothing.
   */
  exportBacklog(sample: () => Promise<BacklogSample>): void {
    if (this.backlogExported) return;
    this.backlogExported = true;
    const latest = memoizedSample(sample, { reuseMs: BACKLOG_SAMPLE_REUSE_MS, deadlineMs: BACKLOG_SAMPLE_DEADLINE_MS });
    const queuedRuns: Gauge<'mode'> = new Gauge({
      name: 'ironflow_queued_runs',
      help: 'Runs ready to be claimed (waiting_for_capacity, available_at passed), by mode; from the capacity scanner',
      labelNames: ['mode'],
      registers: [this.registry],
      collect: async () => {
        const s = await latest();
        if (s) for (const mode of EXECUTION_MODES) queuedRuns.set({ mode }, s.queued.find((q) => q.mode === mode)?.count ?? 0);
      },
    });
    const oldestAge: Gauge<'mode'> = new Gauge({
      name: 'ironflow_oldest_queued_run_age_seconds',
      help: 'How long the oldest run ready to be claimed has waited, by mode (0 when none); from the capacity scanner',
      labelNames: ['mode'],
      registers: [this.registry],
      collect: async () => {
        const s = await latest();
        if (!s) return;
        for (const mode of EXECUTION_MODES) {
          const oldest = s.queued.find((q) => q.mode === mode)?.oldestAvailableAt;
          oldestAge.set({ mode }, oldest == null ? 0 : Math.max(0, (s.now - oldest) / 1000));
        }
      },
    });
    const activeWorkers: Gauge = new Gauge({
      name: 'ironflow_workers_active',
      help: 'Registered workers (pull and stream) seen within the lease; from the capacity scanner',
      registers: [this.registry],
      collect: async () => {
        const s = await latest();
        if (s) activeWorkers.set(s.activeWorkers);
      },
    });
  }
}
