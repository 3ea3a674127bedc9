import { DEFAULT_MAX_PAYLOAD_BYTES, STREAM_MAX_MESSAGE_BYTES } from '@ironflow/contracts';
import { DEFAULT_LOCK_LIMIT_MS } from '@ironflow/store';

/**
 * Every interval of the engine, in ms, so tests run the contract with short ones. Defaults are
 * the specification's (DESIGN.md "Defaults").
 */
export interface EngineConfig {
  /** This node's id, the holder of push leases. */
  nodeId: string;
  /** Lease period of an execution (default 90000). */
  leaseMs: number;
  /** Scheduler tick (default 1000). */
  tickMs: number;
  /** The waiting-run pass runs every this many ticks (default 10). */
  waitingPassEveryTicks: number;
  /** Rows a pass reads per page (default 100). */
  passPageSize: number;
  /** How often a dispatcher polls the queue when no hint arrives (default 1000). */
  dispatchPollMs: number;
  /** Push invocations in flight per dispatcher (default 16). */
  pushConcurrency: number;
  /** Store poll period of TriggerSync (default 100). */
  syncPollMs: number;
  /**
   * How long an api-gateway waits for a dispatcher to answer a forwarded sync trigger before it
   * triggers itself with the same event id (default 2000; `TriggerForwarder`).
   */
  triggerForwardTimeoutMs: number;
  /**
   * How long a dispatcher holds a forwarded sync trigger for a push slot to free when all are taken
   * (default 1000; below `triggerForwardTimeoutMs`, so its answer comes in time), before it answers
   * `busy` and the gateway triggers itself. 0: answer `busy` at once. (With 8 triggers per slot
   * waiting already, it runs the trigger at once with its run queued for a claim.)
   */
  forwardedTriggerWaitMs: number;
  /** Default TriggerSync wait (default 30000). */
  syncDefaultTimeoutMs: number;
  /** Largest accepted event data or report, in bytes (default 4 MiB). */
  maxPayloadBytes: number;
  /**
   * Largest message the engine sends on a worker stream, in bytes (default 64 MiB, what our SDK's
   * gRPC client accepts): a job assignment that would encode larger is never sent; its attempt
   * fails at once with `PAYLOAD_TOO_LARGE`, not retryable.
   */
  streamMaxMessageBytes: number;
  /** Most jobs one poll hands out (default 10). */
  maxJobsPerPoll: number;
  /** Shutdown: wait for follow-ups at least this long (default 5000). */
  followUpDrainMs: number;
  /** Consecutive lease recoveries before the run fails with EXECUTION_RECOVERY_EXHAUSTED (default 10). */
  recoveryCeiling: number;
  /** Capacity scanner period (default 1000). */
  scanMs: number;
  /**
   * The one lock limit of the engine's use-case transactions on PostgreSQL (default 1000, the
   * specification's 1 s): how long a wake, an admission's dispatch and resume, a sleep wakeup, a
   * timeout, a lease recovery or a pass's dispatch waits for a row, table or advisory lock before
   * it gives up with `LockTimeoutError`, changing nothing, for a later pass to finish
   * (`unitWithLockLimit` in `@ironflow/store`). No effect on SQLite, which has no row locks.
   * Every other statement on PostgreSQL is bounded by the store connections' own limit
   * (`StoreOptions.lockTimeoutMs`, also 1000 by default); a one-statement trigger runs without a
   * transaction (one round trip) when the two are equal, else in a transaction holding this limit.
   */
  lockLimitMs: number;
  /**
   * How long past its timeout an invoke step whose child has ended is left to its wake (default
   * 86400000, 24 h): the timeout sweep skips it until then, and times it out after.
   */
  invokeGraceMs: number;
  /**
   * A sleep claim older than this is freed by the stale-claim recovery (default 120000); the
   * recovery runs every `staleClaimRecoveryEveryMs` (default 60000), so a claim whose wakeup gave
   * up is freed 2 to 3 minutes after it was taken.
   */
  staleClaimMs: number;
  staleClaimRecoveryEveryMs: number;
  /**
   * PostgreSQL: how long a freeze or thaw waits for each lock it needs under the instance authority
   * row (the row itself, `audit_events` for its audit insert), ms (default 500). Past it the
   * transition rolls back, changes nothing and answers `UNAVAILABLE`.
   */
  authorityLockTimeoutMs: number;
  /** `cancel_on` replay buffer: a new run replays cancel events stamped up to this long before its creation (default 30000). */
  cancelOnReplayWindowMs: number;
  /** Event log rows the replay reads per `cancel_on` spec (default 1000). */
  cancelOnReplayRowsPerSpec: number;
  /** How long an admission's effects wait for a slot before leaving the rest to the pass (default 5000). */
  admissionSlotWaitMs: number;
  /** How long a pass's admission waits for the child's `run.created` row before its replay and dispatch (default 1000). */
  createdRowWaitMs: number;
  /**
   * The pending-invocation pass and the orphan sweep leave a run alone this long after its
   * creation, so an admission under way is not done twice (default 10000: its own longest waits,
   * the `run.created` row's 5 s budget and the 5 s slot wait; well inside the 30 s default invoke
   * timeout, which a child left held would otherwise reach).
   */
  admissionGraceMs: number;
  /** Time an audit row has to get a slot and be written, its recording lookup included (default 5000). */
  auditBudgetMs: number;
  /**
   * Time best-effort store work of a follow-up (a run event's dead letter) has to get a slot and
   * commit, its lock waits included (default 5000); past it the work is dropped and logged.
   */
  followUpBudgetMs: number;
  /** Audit writes and recording lookups running or waiting before a row is dropped at once (default 1024). */
  auditBacklog: number;
  /**
   * How long an audit row nobody waits for (a run's `run.created` row, the outcome row of a report
   * that returns at its commit) may wait for other rows to share its insert, ms (default 1000; 0:
   * each goes as soon as a slot is free). Rows a caller waits for are never held back, and take
   * the waiting rows along; a request that fills (`maxBatch`, 256 rows) goes at once, and shutdown
   * ends the wait. DESIGN.md "Performance budgets": consecutive runs' rows share one write
   * transaction, so the audit rows cost one transaction per second of traffic, not one per run
   * (issue 11: at ~75 sequential runs/s, 0.013 a run; 0.13 with 100 ms). The wait comes out of the
   * row's 5 s budget, and is what a crash can cost of the rows: a second of rows.
   */
  auditLingerMs: number;
  /** How long a function's looked-up recording profile is used before it is read again (default 30000). */
  recordingRefreshMs: number;
  /**
   * `IRONFLOW_PUSH_ALLOWED_HOSTS`: where push endpoints may be (CIDRs, addresses, host names,
   * `*.domain`); empty (default) = anywhere but link-local and metadata addresses.
   */
  pushAllowedHosts: string[];
  /**
   * Cron (default 10000): a tick at most this late fires in the next pass (a slow pass leaves no
   * gap); a schedule further behind missed its ticks, which collapse into one run for the latest.
   */
  cronCatchUpMs: number;
  /**
   * Key of the push signature (WIRE-PROTOCOL.md 2.1): when set, every push request carries
   * `X-Ironflow-Signature: sha256=<hex HMAC-SHA256(key, raw body)>`; unset (default), none.
   */
  signingKey?: string;
}

export const DEFAULT_ENGINE_CONFIG: EngineConfig = {
  nodeId: 'node-1',
  leaseMs: 90_000,
  tickMs: 1000,
  waitingPassEveryTicks: 10,
  passPageSize: 100,
  dispatchPollMs: 1000,
  pushConcurrency: 16,
  syncPollMs: 100,
  triggerForwardTimeoutMs: 2000,
  forwardedTriggerWaitMs: 1000,
  syncDefaultTimeoutMs: 30_000,
  maxPayloadBytes: DEFAULT_MAX_PAYLOAD_BYTES,
  streamMaxMessageBytes: STREAM_MAX_MESSAGE_BYTES,
  maxJobsPerPoll: 10,
  followUpDrainMs: 5000,
  recoveryCeiling: 10,
  scanMs: 1000,
  lockLimitMs: DEFAULT_LOCK_LIMIT_MS,
  invokeGraceMs: 86_400_000,
  staleClaimMs: 120_000,
  staleClaimRecoveryEveryMs: 60_000,
  authorityLockTimeoutMs: 500,
  cancelOnReplayWindowMs: 30_000,
  cancelOnReplayRowsPerSpec: 1000,
  admissionSlotWaitMs: 5000,
  createdRowWaitMs: 1000,
  admissionGraceMs: 10_000,
  pushAllowedHosts: [],
  auditBudgetMs: 5000,
  followUpBudgetMs: 5000,
  auditBacklog: 1024,
  auditLingerMs: 1000,
  recordingRefreshMs: 30_000,
  cronCatchUpMs: 10_000,
};
