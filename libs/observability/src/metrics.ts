import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { AUDIT_EVENT_TYPES } from '@ironflow/contracts';

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
  readonly parentWakes = new Counter({ name: 'ironflow_parent_wakes_total', help: 'Parent wakes applied', labelNames: ['path'], registers: [this.registry] });

  readonly resultPublishFailures = new Counter({ name: 'ironflow_run_result_publish_failures_total', help: 'RESULTS frames that could not be published (the caller still sees success)', registers: [this.registry] });
  readonly runEventPublishFailures = new Counter({ name: 'ironflow_run_event_publish_failures_total', help: 'Run and step events that could not be published (kept in dead_letters without payload)', labelNames: ['event'], registers: [this.registry] });
  readonly followUpAttempts = new Counter({ name: 'ironflow_follow_up_attempts_total', help: 'Post-commit follow-ups started', labelNames: ['kind'], registers: [this.registry] });
  readonly followUpFailures = new Counter({ name: 'ironflow_follow_up_failures_total', help: 'Post-commit follow-ups that failed', labelNames: ['kind'], registers: [this.registry] });
  readonly followUpLatency = new Histogram({ name: 'ironflow_follow_up_seconds', help: 'Post-commit follow-up duration', labelNames: ['kind'], buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], registers: [this.registry] });
  readonly auditWriteFailures = new Counter({ name: 'ironflow_audit_write_failures_total', help: 'Audit rows lost (backlog, budget, stop, a failed insert or a failed recording lookup); every row is stored or counted once', labelNames: ['event_type'], registers: [this.registry] });
  readonly leaseRecoveries = new Counter({ name: 'ironflow_lease_recoveries_total', help: 'Expired leases recovered by the capacity scanner', labelNames: ['effect'], registers: [this.registry] });
  readonly triggerExpressionErrors = new Counter({ name: 'ironflow_trigger_expression_errors_total', help: 'Trigger expressions that failed on an event (no run was started for that trigger)', labelNames: ['function_id'], registers: [this.registry] });
  readonly staleMutationsRejected = new Counter({ name: 'ironflow_capacity_stale_mutations_rejected_total', help: 'Reports dropped because their execution is no longer live', registers: [this.registry] });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
    for (const eventType of AUDIT_EVENT_TYPES) this.auditWriteFailures.inc({ event_type: eventType }, 0);
  }
}
