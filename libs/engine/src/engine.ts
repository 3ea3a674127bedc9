import { Bus } from '@ironflow/bus';
import { AuditRecorder, AuditSink, AuditWriter, FollowUpTracker, InProcessAuditSink, SlotSet, slotsFor } from '@ironflow/follow-up';
import { EngineLogger, EngineMetrics, silentLogger } from '@ironflow/observability';
import { Clock, Store, functionsSql } from '@ironflow/store';
import { CancelSystem } from './cancel-system';
import { EngineClientApi } from './client-api';
import { DEFAULT_ENGINE_CONFIG, EngineConfig } from './config';
import { CronSystem } from './cron-system';
import { DebounceSystem } from './debounce-system';
import { DispatchHints } from './dispatch-hints';
import { DispatchSystem } from './dispatch-system';
import { FunctionRegistry } from './function-registry';
import { OutcomeAnnouncer } from './outcome-announcer';
import { PausePoints, noPausePoints } from './pause-points';
import { PauseSystem } from './pause-system';
import { PubSubSystem } from './pubsub-system';
import { PullWorkerSystem } from './pull-worker-system';
import { PushDispatcher } from './push-dispatcher';
import { ReportSystem } from './report-system';
import { EngineResources } from './resources';
import { SchedulerSystem } from './scheduler-system';
import { TickLoop } from './tick-loop';
import { StreamWorkerSystem } from './stream-worker-system';
import { TriggerExpressions } from './trigger-expressions';
import { TriggerSystem } from './trigger-system';
import { WakeSystem } from './wake-system';
import { LeaseRecoverySystem } from './lease-recovery-system';
import { CancelOnSystem } from './cancel-on-system';
import { InvokeAdmission } from './invoke-admission';
import { OrphanSweep } from './orphan-sweep';
import { PendingInvokePass } from './pending-invoke-pass';
import { ExecutionTimeoutSystem } from './execution-timeout-system';
import { ReleaseSystem } from './release-system';
import { ApiKeySystem, ApiKeySystemOptions } from './api-key-system';
import { PushEndpointPolicy } from './push-endpoint-policy';
import { SecretCipher } from './secret-cipher';
import { SecretSystem } from './secret-system';
import { countOutcomeCommitErrors } from './outcome-commit-errors';
import { sampleBacklog } from './backlog-sample';
import { InstanceControl } from './instance-control';

export interface EngineOptions {
  store: Store;
  clock: Clock;
  bus: Bus;
  config?: Partial<EngineConfig>;
  logger?: EngineLogger;
  metrics?: EngineMetrics;
  pausePoints?: PausePoints;
  /** Where audit rows go; default an in-process writer over `store` (`ironflow dev`, tests). */
  auditSink?: AuditSink;
  /** PostgreSQL pool size, for the slot sets (a quarter of it); default 10. */
  poolSize?: number;
  /** Replaces the follow-up tracker (fault injection: a crash after the commit). */
  followUps?: FollowUpTracker;
  /** `IRONFLOW_SECRETS_KEY` (32 bytes): without it secrets cannot be set or delivered. */
  secretsKey?: Buffer;
  /** API keys: `IRONFLOW_REQUIRE_API_KEY`, `IRONFLOW_ADMIN_KEY`, lookup cache period. */
  auth?: ApiKeySystemOptions;
  /** Where push dispatch may connect; default: built from `config.pushAllowedHosts`. */
  pushEndpoints?: PushEndpointPolicy;
  /**
   * Where `run get` reads a run's audit rows: a small pool of its own on PostgreSQL, so a locked
   * `audit_events` table never holds the engine's connections; default `store`.
   */
  auditReadStore?: Store;
}

/** The loops a process runs: a dispatcher pushes, a scheduler ticks. `ironflow dev` runs both. */
export interface EngineRoles {
  pushDispatch: boolean;
  /**
   * Without `pushDispatch`: push dispatch of the runs this node claims itself, without a claim loop
   * (`PushDispatcher.start(false)`): the cluster's api-gateway calls the push runs of its sync
   * triggers at once instead of handing them to a dispatcher (issue 11). Default false.
   */
  pushAtOnce?: boolean;
  scheduler: boolean;
  /** The capacity scanner: lease expiry and recovery. */
  scanner?: boolean;
}

/**
 * The engine facade: builds each system once over one resource bundle and hands every public
 * call to the system that owns it (STYLE.md, "a thin facade over systems").
 */
export class Engine {
  readonly resources: EngineResources;
  readonly functions: FunctionRegistry;
  readonly triggers: TriggerSystem;
  readonly dispatch: DispatchSystem;
  readonly reports: ReportSystem;
  readonly wakes: WakeSystem;
  readonly scheduler: SchedulerSystem;
  /** The scheduler's cron pass. */
  readonly cron: CronSystem;
  /** Debounce: pending events and the scheduler's pass that starts their runs. */
  readonly debounces: DebounceSystem;
  readonly cancels: CancelSystem;
  /** Pause, resume and step injection. */
  readonly pauses: PauseSystem;
  /** Developer pub/sub: Publish, ListTopics. */
  readonly pubsub: PubSubSystem;
  readonly pull: PullWorkerSystem;
  readonly push: PushDispatcher;
  /** Streaming pull workers (`WorkerService.Connect`); its loop runs while a stream is open. */
  readonly streams: StreamWorkerSystem;
  readonly api: EngineClientApi;
  readonly recovery: LeaseRecoverySystem;
  /** `cancel_on`: the live match of an emitted event and the replay of a new run. */
  readonly cancelOn: CancelOnSystem;
  /** Invoke admission: a held child's (or held run's) `run.created` row, replay and dispatch. */
  readonly admissions: InvokeAdmission;
  /** Recovers invocations whose admission a report's follow-up did not finish. */
  readonly pendingInvokes: PendingInvokePass;
  /** Finds held runs whose admission was interrupted and finishes them. */
  readonly orphans: OrphanSweep;
  /** The function timeout of every transport (the capacity scanner's pass, after lease recovery). */
  readonly timeouts: ExecutionTimeoutSystem;
  /** Work a worker gives back (a REST release, a closed stream). */
  readonly releases: ReleaseSystem;
  /** API keys: creation, revocation, and the scope of every authenticated call. */
  readonly apiKeys: ApiKeySystem;
  /** The secret store (encrypted at rest), resolved into the segments of functions that declare secrets. */
  readonly secrets: SecretSystem;
  /** The push endpoint allow-list, checked at registration and on every push connection. */
  readonly pushEndpoints: PushEndpointPolicy;
  /** Freeze and thaw of the instance authority, and its status. */
  readonly instance: InstanceControl;
  private scanTimer?: NodeJS.Timeout;
  private scanRunning?: Promise<unknown>;
  private readonly stopping = new AbortController();
  private stopped = false;

  constructor(options: EngineOptions) {
    const logger = options.logger ?? silentLogger;
    const metrics = options.metrics ?? new EngineMetrics();
    const slots = slotsFor(options.store.dialect, options.poolSize ?? 10);
    const auditSink = options.auditSink ?? new InProcessAuditSink(new AuditWriter(options.store, new SlotSet(slots)));
    const config = { ...DEFAULT_ENGINE_CONFIG, ...options.config };
    this.resources = {
      store: countOutcomeCommitErrors(options.store, metrics),
      clock: options.clock,
      bus: options.bus,
      config,
      logger,
      metrics,
      followUps: options.followUps ?? new FollowUpTracker(logger, {
        started: (kind) => metrics.followUpAttempts.inc({ kind }),
        ended: (kind, ok, seconds) => {
          if (!ok) metrics.followUpFailures.inc({ kind });
          metrics.followUpLatency.observe({ kind }, seconds);
        },
      }),
      pausePoints: options.pausePoints ?? noPausePoints,
      audit: new AuditRecorder(auditSink, {
        slots,
        budgetMs: config.auditBudgetMs,
        backlog: config.auditBacklog,
        lingerMs: config.auditLingerMs,
        recordingRefreshMs: config.recordingRefreshMs,
        recordingLookup: (project, env, functionId) => options.store.read('recordingLookup', (tx) => functionsSql.getRecordingProfile(tx, project, env, functionId)),
        onDrop: (eventType, reason, error) => {
          metrics.auditWriteFailures.inc({ event_type: eventType });
          logger.warn('audit: row dropped', { event_type: eventType, reason, error });
        },
      }),
      auditReads: options.auditReadStore ?? options.store,
      wakeSlots: new SlotSet(slots),
      followUpSlots: new SlotSet(slots),
    };
    const r = this.resources;
    const hints = new DispatchHints(r.bus, r.clock);
    const announcer = new OutcomeAnnouncer(r);
    this.apiKeys = new ApiKeySystem(r.store, options.auth);
    this.secrets = new SecretSystem(r.store, options.secretsKey ? new SecretCipher(options.secretsKey) : undefined);
    this.pushEndpoints = options.pushEndpoints ?? new PushEndpointPolicy({ allowedHosts: r.config.pushAllowedHosts });
    this.functions = new FunctionRegistry(r, this.secrets, this.pushEndpoints);
    this.cancels = new CancelSystem(r, announcer);
    this.cancelOn = new CancelOnSystem(r, announcer, this.cancels);
    this.admissions = new InvokeAdmission(r, announcer, this.cancelOn, hints);
    this.pendingInvokes = new PendingInvokePass(r, this.admissions);
    this.orphans = new OrphanSweep(r, this.admissions);
    this.cron = new CronSystem(r, hints, this.admissions);
    this.debounces = new DebounceSystem(r, hints, this.admissions);
    this.triggers = new TriggerSystem(r, hints, new TriggerExpressions(r.metrics), this.debounces, this.cancelOn, this.admissions);
    this.reports = new ReportSystem(r, announcer, hints, this.admissions);
    this.dispatch = new DispatchSystem(r, this.secrets, this.reports);
    this.wakes = new WakeSystem(r, announcer, hints);
    announcer.setParentWake((child) => this.wakes.wakeParent(child));
    this.scheduler = new SchedulerSystem(r, this.wakes, announcer, hints, this.cron, this.debounces, { pendingInvokes: this.pendingInvokes, orphans: this.orphans, cancelOn: this.cancelOn });
    this.releases = new ReleaseSystem(r, hints, announcer);
    this.pull = new PullWorkerSystem(r, this.dispatch, this.reports, this.releases);
    this.push = new PushDispatcher(r, this.dispatch, this.reports, hints, this.pushEndpoints, this.releases);
    this.triggers.setDispatchAtOnce(this.push);
    this.admissions.setDispatchAtOnce(this.push);
    this.wakes.setDispatchAtOnce(this.push);
    this.streams = new StreamWorkerSystem(r, this.dispatch, this.reports, this.pull, hints, this.releases);
    metrics.countStreamConnections(() => this.streams.connectionCount);
    metrics.countAuditPending(() => r.audit.inFlight);
    this.pauses = new PauseSystem(r, announcer, hints);
    this.pubsub = new PubSubSystem(r);
    this.api = new EngineClientApi(r, this.functions, this.triggers, this.cancels, this.pauses);
    announcer.setLocalFrames(this.api.resultWaiters);
    this.recovery = new LeaseRecoverySystem(r, announcer, hints);
    this.timeouts = new ExecutionTimeoutSystem(r, this.reports);
    this.instance = new InstanceControl(r);
  }

  /** Starts the loops of `roles`; calling it again adds roles (a loop never starts twice). */
  start(roles: EngineRoles): void {
    if (roles.pushDispatch || roles.pushAtOnce) this.push.start(roles.pushDispatch);
    if (roles.scheduler && !this.stopped) this.schedulerLoops().forEach((loop) => loop.start());
    if (roles.scanner && !this.scanRunning) {
      this.resources.metrics.exportBacklog(() => sampleBacklog(this.resources));
      this.scheduleScan();
    }
  }

  private scheduleScan(): void {
    if (this.stopped) return;
    this.scanRunning = Promise.resolve();
    this.scanTimer = setTimeout(() => {
      this.scanRunning = this.recovery
        .scan()
        .then(() => this.timeouts.scan())
        .catch((err: unknown) => this.resources.logger.warn('capacity scan failed; it runs again next period', { error: String(err) }))
        .finally(() => this.scheduleScan());
    }, this.resources.config.scanMs);
  }

  /**
   * The scheduler's loops, each on its own timer (a stall in one does not stop the others): the
   * main tick, the sleep sweep, and the waiting-run pass every `waitingPassEveryTicks` ticks.
   */
  private schedulerLoops(): TickLoop[] {
    const { tickMs, waitingPassEveryTicks } = this.resources.config;
    return (this.loops ??= [
      new TickLoop(tickMs, () => this.scheduler.tick(this.stopping.signal)),
      new TickLoop(tickMs, () => this.scheduler.sleepTick()),
      new TickLoop(tickMs * waitingPassEveryTicks, () => this.scheduler.passTick(this.stopping.signal)),
    ]);
  }

  private loops?: TickLoop[];

  /**
   * Stops the loops, drains push invocations in flight (up to `drainMs`, default 30000) while
   * stream workers get `shutdown` and drain (up to 25000 ms), then waits
   * for follow-ups (at least `followUpDrainMs`), so an outcome committed during shutdown is still
   * announced (background audit rows stop lingering as the drain begins); then stops the audit recorder (rows still waiting are dropped and counted, requests
   * running are answered within their budget). A push call still open after the drain is not
   * waited for: its lease is no longer refreshed, and lease recovery takes the run once it expires
   * (a late answer is applied fenced while the store is open). Sync calls (TriggerSync…) in flight answer by
   * `drainMs` (`UNAVAILABLE` naming their runs when these are still going) and new ones are
   * refused. Does not close the store or the bus: their owner does.
   */
  stop(drainMs = 30_000): Promise<void> {
    // Once: a second call (the runtime closing after the server drained) waits for the first.
    return (this.stopOnce ??= this.drainAndStop(drainMs));
  }

  private stopOnce?: Promise<void>;

  private async drainAndStop(drainMs: number): Promise<void> {
    this.api.syncWaits.drain(Date.now() + drainMs);
    // The shared RESULTS subscriptions end once the last sync call answered (new ones are refused).
    void this.api.syncWaits.idle().then(() => this.api.resultWaiters.close());
    this.stopped = true;
    this.stopping.abort();
    // Rows lingering for company would only hold the follow-up drain back.
    this.resources.audit.endLinger();
    const loopsStopped = Promise.all((this.loops ?? []).map((loop) => loop.stop()));
    clearTimeout(this.scanTimer);
    const started = Date.now();
    await Promise.all([this.push.stop(drainMs), this.streams.stop(drainMs)]);
    await loopsStopped;
    await this.scanRunning;
    const left = drainMs - (Date.now() - started);
    await this.resources.followUps.drain(Math.max(left, this.resources.config.followUpDrainMs));
    await this.resources.audit.stop();
    // The push connection pool's close waits for the requests still open: a push call that outlived
    // the drain (its lease no longer refreshed) is left to lease recovery (README "Shutdown"), so the
    // stop does not wait for it, and the process can close its listener, store and bus and exit 0.
    const poolClosed = this.pushEndpoints.close().catch(() => undefined);
    if (this.push.callsInFlight === 0) await poolClosed;
  }
}
