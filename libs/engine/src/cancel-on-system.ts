import { RunError, WireEvent, isTerminalRunStatus } from '@ironflow/contracts';
import { EventRecord, PassCursor, RunRecord, Tx, cancelOnSql, eventsSql, passCursorsSql, runsSql, unitWithLockLimit } from '@ironflow/store';
import { commitOutcome } from '@ironflow/outcome';
import { CancelOnPathReads } from './cancel-on-path-reads';
import { CancelSystem, closeWaitsOfCancelled } from './cancel-system';
import { cancelOnConditions, matchValueAt, specMatches } from './cancel-on-specs';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';
import { runEventOf, toWireEvent } from './segment-loader';

/**
 * `cancel_on` (WIRE-PROTOCOL.md 5.3 `cancelOn`; specification, "What follows a commit" and
 * "Two recovery paths announce the same way"). A function's `cancelOn: [{event, match}]` cancels
 * every run of it that has not ended when an event of that name arrives whose value at the
 * `match` path equals the run's (OR across specs; a spec without `match` matches any event of
 * the name), and whose CEL condition `if`, when it has one, holds over `event` (the run's own
 * event, as its handler sees it) and `async` (the cancel event). A condition that fails on an
 * event (a missing key) does not match, and is counted in
 * `ironflow_cancel_on_expression_errors_total{function_id}`. The specs are written as
 * `cancel_on_specs` rows in the run's creating transaction.
 *
 * Three paths reach a run:
 * - the live match (`matchEvent`), run after the event's commit off the emitter's path (its first
 *   read, which `match` paths the event's name has, shared by the matches asked for while another
 *   such read was under way: `CancelOnPathReads`), finds the runs whose specs the event matches,
 *   created by its time plus the replay window, as the reconcile does;
 * - the reconcile (`reconcile`, a scheduler pass), for a live match lost between the event's
 *   commit and its announce (the node died): it matches again every logged event of a name some
 *   live run has a spec for, once it is `RECONCILE_SETTLE_MS` old (a live match normally ran by
 *   then; a second match changes nothing), in log order from a cursor kept in the store
 *   (`pass_cursors`), so neither load nor a restart makes it skip an event. An event cancels only
 *   runs created by its time plus the replay window, the runs its live match or their replay
 *   could have cancelled, however late the reconcile reaches it;
 * - the replay (`replay`), run after a new run's commit and before its dispatch, reads the event
 *   log for cancel events stamped up to `cancelOnReplayWindowMs` (30 s) before the run was
 *   created, at most `cancelOnReplayRowsPerSpec` (1000) a spec, up to the store's clock. The log
 *   is the store, so the replay also sees an event another node took, and holds after a restart.
 * Each reads after its own commit, so an event and a run committed at the same time cannot miss
 * each other: whichever commits second sees the other.
 *
 * A `cancel_on` cancel commits like any cancel (the run's `waitForEvent` correlations close and the
 * children it waits on are cancelled) and is announced from the committed row: the RESULTS frame,
 * the `cancelled` run event, a `run.cancelled` audit row with cause `cancel-on-event`, and the
 * parent wake, all off the caller's path. Its error reads `cancel_on: <event name> <event id>`.
 * A match that finds a run ended deletes that run's specs (the cleanup a lost follow-up left).
 */
/** How old a logged event must be before the reconcile matches it again (its live match normally ran by then), ms. */
export const RECONCILE_SETTLE_MS = 2000;
/** The reconcile's row in `pass_cursors`. */
export const RECONCILE_CURSOR = 'cancel_on_reconcile';

export class CancelOnSystem {
  /** The matches' first reads, shared by the matches asked for during one. */
  private readonly pathReads: CancelOnPathReads;

  constructor(
    private readonly r: EngineResources,
    private readonly announcer: OutcomeAnnouncer,
    private readonly cancels: CancelSystem,
  ) {
    this.pathReads = new CancelOnPathReads(r.store);
  }

  /**
   * The match of a committed event, live or by the reconcile: cancels every run its specs match
   * (one unit of work a run, so a bad row costs only itself; a failed one is logged), only runs
   * created by the event's time plus `cancelOnReplayWindowMs` (the runs its live match or their
   * replay could have cancelled: a match that starts late cancels no run created after them). Returns the runs cancelled.
   */
  async matchEvent(event: EventRecord): Promise<number> {
    const createdUpTo = event.ts + this.r.config.cancelOnReplayWindowMs;
    const paths = await this.pathReads.pathsOf({ project: event.project, env: event.env, eventName: event.name });
    if (paths.length === 0) return 0;
    const matched = await this.r.store.read('cancelOnMatch', (tx) =>
      cancelOnSql.listMatchingRuns(tx, event.project, event.env, event.name, paths, (path) => matchValueAt(event.data, path), createdUpTo),
    );
    let cancelled = 0;
    for (const { runId, conditions } of matched) {
      try {
        if (await this.cancelFor(runId, event, conditions)) cancelled += 1;
      } catch (err) {
        this.r.logger.warn('cancel_on match could not cancel a run', { run_id: runId, event_id: event.id, error: String(err) });
      }
    }
    return cancelled;
  }

  /**
   * The replay of a new run, before its dispatch: reads the run's specs, then the event log for
   * each, and cancels the run at the first event that matches. Resolves the committed cancel, or
   * `null` when nothing matched (or another outcome ended the run first). Throws a store error
   * from the spec read, the log read or the cancel, so the caller does not dispatch the run.
   */
  async replay(run: RunRecord): Promise<RunRecord | null> {
    const specs = await this.r.store.read('cancelOnSpecs', (tx) => cancelOnSql.listSpecsOfRun(tx, run.id));
    if (specs.length === 0) return null;
    const since = run.createdAt - this.r.config.cancelOnReplayWindowMs;
    for (const spec of specs) {
      const events = await this.r.store.read('cancelOnReplayLog', (tx) =>
        cancelOnSql.listReplayEvents(tx, run.project, run.env, spec.eventName, since, run.eventId, this.r.config.cancelOnReplayRowsPerSpec),
      );
      const candidates = events.filter((e) => specMatches(spec, e.data));
      if (candidates.length === 0) continue;
      if (spec.condition !== null) {
        // A condition reads the run's own event; the first candidate it accepts cancels.
        const own = await this.r.store.read('cancelOnRunEvent', (tx) => runEventIn(tx, run));
        const match = candidates.find((e) => this.holds(spec.condition!, run, own, e));
        if (match) return this.cancelFor(run.id, match, []);
        continue;
      }
      return this.cancelFor(run.id, candidates[0], []);
    }
    return null;
  }

  /**
   * Cancels `runId` for `event` unless it has ended (then only its specs are deleted), or unless
   * `conditions` (the matched specs' `if`, `null` for none) are given and none holds for the run
   * read here. Announces the cancel.
   */
  private async cancelFor(runId: string, event: EventRecord, conditions: (string | null)[]): Promise<RunRecord | null> {
    const result = await this.r.store.unitOfWork('cancelOnCancel', async (tx) => {
      const run = await runsSql.getRun(tx, runId, { lock: true });
      // The event that created a run does not cancel it.
      if (!run || run.eventId === event.id) return null;
      if (isTerminalRunStatus(run.status)) {
        await cancelOnSql.deleteSpecsOfRun(tx, runId);
        return null;
      }
      if (conditions.length > 0 && !conditions.includes(null)) {
        const own = await runEventIn(tx, run);
        if (!conditions.some((c) => this.holds(c!, run, own, event))) return null;
      }
      await this.r.pausePoints.reached('cancelOn.afterRead', runId);
      const committed = await commitOutcome(tx, runId, { status: 'cancelled', error: cancelOnError(event) }, { kind: 'not-terminal' });
      if (!committed) return null;
      await cancelOnSql.deleteSpecsOfRun(tx, runId);
      return { committed, held: run.held, awaitedChildren: await closeWaitsOfCancelled(tx, run) };
    });
    if (!result) return null;
    this.cancels.cancelAwaitedChildren(result.committed, result.awaitedChildren);
    // A held run's admission may not have written its run.created row yet: the announce writes it first.
    void this.announcer.announce(result.committed, 'cancel-on-event', { held: result.held });
    return result.committed;
  }

  /** Whether `condition` holds for `run` (whose own event is `own`) and the cancel event; an error counts and does not hold. */
  private holds(condition: string, run: RunRecord, own: WireEvent, cancel: EventRecord): boolean {
    try {
      return cancelOnConditions.test(condition, { event: own, async: toWireEvent(cancel) });
    } catch {
      this.r.metrics.cancelOnExpressionErrors.inc({ function_id: run.functionId });
      return false;
    }
  }

  private cleanupCursor = '';
  /** The last event the reconcile matched (store clock ms, id); read from the store on its first pass. */
  private reconcileCursor?: PassCursor;

  /**
   * The scheduler's `cancel_on` reconcile (see the class comment): pages through the event log
   * from its cursor up to `RECONCILE_SETTLE_MS` ago, at most `pages` pages of `passPageSize`, and
   * matches each event as the live match does, against the runs created by the event's time plus
   * `cancelOnReplayWindowMs`. The cursor starts where the store's says (`pass_cursors`, moved
   * forward after every pass), or, the first time ever, at the start of the replay window. It
   * never jumps ahead: a pass that ends with events left sets `ironflow_cancel_on_reconcile_lag_seconds`
   * to how far its cursor is behind, logs a warning, and the next pass goes on from there (the
   * gauge is 0 once a pass reaches the end). Returns the runs it cancelled.
   */
  async reconcile(pages = 10): Promise<number> {
    const now = this.r.clock.now();
    const upTo = now - RECONCILE_SETTLE_MS;
    const window = this.r.config.cancelOnReplayWindowMs;
    this.reconcileCursor ??= (await this.r.store.read('readPassCursor', (tx) => passCursorsSql.getCursor(tx, RECONCILE_CURSOR))) ?? { ts: now - window, id: '' };
    const from = this.reconcileCursor;
    let cancelled = 0;
    let behind = false;
    try {
      for (let page = 0; page < pages; page += 1) {
        const after: PassCursor = this.reconcileCursor;
        const events: EventRecord[] = await this.r.store.read('cancelOnReconcile', (tx) => cancelOnSql.listReconcileEvents(tx, after.ts, after.id, upTo, this.r.config.passPageSize));
        for (const event of events) {
          const count = await this.matchEvent(event);
          if (count > 0) this.r.logger.warn('cancel_on reconcile cancelled runs a live match had missed', { event_id: event.id, event_name: event.name, cancelled: count });
          cancelled += count;
          this.reconcileCursor = { ts: event.ts, id: event.id };
        }
        behind = events.length === this.r.config.passPageSize;
        if (!behind) break;
      }
    } finally {
      await this.endReconcile(from, upTo, behind);
    }
    return cancelled;
  }

  /** After a reconcile pass (or its error): the lag gauge and warning, and the cursor stored when it moved. */
  private async endReconcile(from: PassCursor, upTo: number, behind: boolean): Promise<void> {
    const cursor = this.reconcileCursor!;
    const lagMs = behind ? Math.max(0, upTo - cursor.ts) : 0;
    this.r.metrics.cancelOnReconcileLag.set(lagMs / 1000);
    if (behind) this.r.logger.warn('cancel_on reconcile is behind the event log; its next pass goes on from its cursor', { behind_ms: lagMs, cursor_event_id: cursor.id });
    if (cursor === from) return;
    try {
      await unitWithLockLimit(this.r.store, 'advancePassCursor', this.r.config.lockLimitMs, (tx) => passCursorsSql.advanceCursor(tx, RECONCILE_CURSOR, cursor));
    } catch (err) {
      this.r.logger.warn('cancel_on reconcile could not store its cursor; the next pass stores it', { error: String(err) });
    }
  }

  /**
   * The scheduler's `cancel_on` cleanup: one page of runs with specs, after its cursor, whose
   * ended runs lose their specs (a cancel_on cancel deletes its own in its commit; other outcomes
   * leave them to this pass or to a later match). Returns the specs deleted.
   */
  async cleanUp(): Promise<number> {
    const { deleted, next } = await unitWithLockLimit(this.r.store, 'cancelOnCleanup', this.r.config.lockLimitMs, (tx) =>
      cancelOnSql.deleteSpecsOfEndedRuns(tx, this.cleanupCursor, this.r.config.passPageSize));
    this.cleanupCursor = next;
    return deleted;
  }
}

/** The event a run's handler receives, read in `tx` (the `event` of a `cancelOn` condition). */
function runEventIn(tx: Tx, run: RunRecord): Promise<WireEvent> {
  return run.eventId ? eventsSql.getEvent(tx, run.eventId).then((stored) => runEventOf(run, stored)) : Promise.resolve(runEventOf(run, null));
}

/** The stored error of a run a `cancel_on` event cancelled: `ironflow run get` shows its message. */
function cancelOnError(event: EventRecord): RunError {
  return { message: `cancel_on: ${event.name} ${event.id}`, code: 'CANCELLED', retryable: false, event_id: event.id, event_name: event.name };
}
