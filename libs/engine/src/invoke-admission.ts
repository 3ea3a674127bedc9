import { RUN_ERROR_CODES, RunError, YieldInfo, isTerminalRunStatus } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { FunctionRecord, InvokeRow, RunRecord, Tx, functionsSql, invokesSql, runsSql, stepsSql, unitWithLockLimit } from '@ironflow/store';
import { CancelOnSystem } from './cancel-on-system';
import { DispatchHints } from './dispatch-hints';
import { DispatchAtOnce, claimWaitEndAtOnce, withReservedSlot } from './dispatch-at-once';
import { insertCancelOnSpecs, newRunOf } from './new-run';
import { OutcomeAnnouncer } from './outcome-announcer';
import { holdsOpenWait } from './pause-announcer';
import { recordStepRow } from './step-audit';
import { stepNameOf } from './step-name';
import { EngineResources } from './resources';
import { recordRunCreated } from './run-created-audit';
import { InstanceFrozen } from './instance-control';

type InvokeYield = Extract<YieldInfo, { type: 'invoke_function' | 'invoke_function_async' }>;

/** A `step.invoke` accepted in a report's unit of work: the held child and its pending invocation. */
export interface AcceptedInvoke {
  child: RunRecord;
  invoke: InvokeRow;
  /** Whether the child's function declares `cancelOn` (else its admission has nothing to replay). */
  cancelOn: boolean;
}

/** A held run to admit, and the pending invocation that created it (`null` for a triggered run). */
export interface AdmissionTarget {
  run: RunRecord;
  invoke: InvokeRow | null;
  /**
   * `false` when the creator knows the run has no `cancel_on` specs, so the replay's spec read is
   * skipped; a pass or the sweep does not know and replays (default `true`).
   */
  replay?: boolean;
}

/**
 * Who admits and how:
 * - `report`: an accepted report's follow-up (writes the `run.created` row and waits for it,
 *   waits on the child's row lock like the report did; its invocation's settle and a parent's
 *   resume give up after `lockLimitMs`);
 * - `created`: a triggered or directly invoked run held for its `cancel_on` replay (same);
 * - `retried-yield`: a repeated invoke report that finds its child created (no rows);
 * - `pass`: the pending-invocation pass (writes the row unless its admission already did, waits at
 *   most `createdRowWaitMs` for it, gives up on a lock after `lockLimitMs`);
 * - `sweep`: the orphan sweep (the `run.created` row only of a run no invocation links, waited
 *   for as the pass does; the same lock limit; it waits, outside the slot, for the `run.status_changed`
 *   row of a refusal it commits, after its frame, so it writes one row at a time).
 */
export type AdmissionPath = 'report' | 'created' | 'retried-yield' | 'pass' | 'sweep';

/**
 * What an admission came to: the child `dispatched` (released to the queue), `ended` (its replay
 * cancelled it, or another outcome had), `refused` (failed for a reason no retry can change),
 * `settled` (cancelled quietly: no parent waits on it), or left to a later pass: `no-slot`,
 * `failed` (a store error), `in-flight` (an admission of it is already under way on this node).
 */
export type AdmissionOutcome = 'dispatched' | 'ended' | 'refused' | 'settled' | 'no-slot' | 'failed' | 'in-flight';

/**
 * Invoke admission (specification, the accepted `step.invoke` report's order of effects; "An
 * invoked child replays cancel_on and is read again before it is dispatched"; "Outcomes nobody
 * announces"). A report that yields `step.invoke` commits, in its own unit of work, the child run
 * (held: no claim takes it), the parent's invoke step linked to it, the parent's wait, and the
 * pending invocation (`function_invokes`). Then, off the report and in this order: for a
 * fire-and-forget invoke the parent's `step.completed` row (`all` profile), the child's
 * `run.created` row, a slot (waiting at most `admissionSlotWaitMs`, 5 s), the child's `cancel_on`
 * replay, a second read of the child under its row lock, and one unit of work that dispatches the
 * child (releases it to the queue), settles the invocation and, for a fire-and-forget invoke,
 * resumes the parent. So later replay never has to undo what a fast child did.
 *
 * A store error stops the admission before its dispatch and leaves it, committed, to the
 * pending-invocation pass and the orphan sweep, which run the same admission again: the replay,
 * the dispatch and the resume are each guarded in SQL, so a second admission changes nothing. A
 * child whose parent link no longer holds is cancelled quietly (`invoke-link-failed`,
 * `invoke-result-won`, `parent-ended`: no frame, no audit row, and from a pass an `updated` run
 * event). A refusal no retry can change (`admissionRefusal`) fails the run it would have queued,
 * announced like any failure, which wakes its parent.
 *
 * An accepted report's admission on a node that dispatches push claims the child it releases in
 * the same unit of work when a push slot is free ({@link claimWaitEndAtOnce}), and calls its
 * endpoint after the commit: the child needs no hint and no claim of its own (issue 11).
 */
export class InvokeAdmission {
  /** Runs whose admission is under way on this node: a pass does not start a second one. */
  private readonly inFlight = new Set<string>();
  private atOnce?: DispatchAtOnce;

  constructor(
    private readonly r: EngineResources,
    private readonly announcer: OutcomeAnnouncer,
    private readonly cancelOn: CancelOnSystem,
    private readonly hints: DispatchHints,
  ) {}

  /**
   * In the report's unit of work: creates the held child of a `step.invoke` yield, the parent's
   * invoke step (waiting until `step.timeoutAt`, or, fire-and-forget, completed with `{run_id}`)
   * and the pending invocation. The caller moves the parent to `waiting`.
   */
  async accept(tx: Tx, parent: RunRecord, y: InvokeYield, target: FunctionRecord, step: { name: string; sequence: number; timeoutAt: number | null }): Promise<AcceptedInvoke> {
    const row = { ...newRunOf(parent, target, null, y.input, { runId: parent.id, stepId: y.step_id }), held: true };
    const async = y.type === 'invoke_function_async';
    // The child, the parent's step and the invocation: one statement on PostgreSQL.
    const { run: child, invoke } = await invokesSql.insertInvokedChild(
      tx,
      row,
      async
        ? { runId: parent.id, stepId: y.step_id, name: step.name, type: 'invoke', status: 'completed', childRunId: row.id, output: { run_id: row.id }, sequence: step.sequence }
        : { runId: parent.id, stepId: y.step_id, name: step.name, type: 'invoke', status: 'waiting', childRunId: row.id, timeoutAt: step.timeoutAt, sequence: step.sequence },
      { parentRunId: parent.id, parentStepId: y.step_id, childRunId: row.id, project: parent.project, env: parent.env, parentFunctionId: parent.functionId, childFunctionId: row.functionId, async },
    );
    await insertCancelOnSpecs(tx, target, child);
    this.r.metrics.runsCreated.inc({ function_id: target.definition.id });
    return { child, invoke, cancelOn: (target.definition.cancelOn ?? []).length > 0 };
  }

  /** Wired by the engine once its push dispatcher exists. */
  setDispatchAtOnce(atOnce: DispatchAtOnce): void {
    this.atOnce = atOnce;
  }

  /** After an accepted report's commit: the child's admission, as a tracked follow-up. */
  afterReport(accepted: AcceptedInvoke): void {
    this.r.followUps.track('invoke-admission', () => this.admit({ run: accepted.child, invoke: accepted.invoke, replay: accepted.cancelOn }, 'report').then(() => undefined));
  }

  /** After a trigger or a direct invoke created `run` held: its `run.created` row, replay and dispatch. */
  afterCreate(run: RunRecord): void {
    this.r.followUps.track('run-admission', () => this.admit({ run, invoke: null }, 'created').then(() => undefined));
  }

  /**
   * A repeated invoke report (a worker retrying after a lost answer): when its invocation is still
   * pending, the child it finds created is replayed and read again before its dispatch.
   */
  afterRetriedYield(parentRunId: string, stepId: string): void {
    this.r.followUps.track('invoke-admission', async () => {
      const target = await this.r.store.read('readPendingInvoke', async (tx) => {
        const invoke = await invokesSql.getInvoke(tx, parentRunId, stepId);
        if (!invoke || invoke.settledAt !== null) return null;
        const run = await runsSql.getRun(tx, invoke.childRunId);
        return run ? { run, invoke } : null;
      });
      if (target) await this.admit(target, 'retried-yield');
    });
  }

  /**
   * Admits a held run (see the class comment). Never throws: a store error is logged and leaves
   * the admission to a later pass. Resolves what the admission came to.
   */
  async admit(target: AdmissionTarget, path: AdmissionPath): Promise<AdmissionOutcome> {
    const { run, invoke } = target;
    if (this.inFlight.has(run.id)) return 'in-flight';
    this.inFlight.add(run.id);
    try {
      const wroteRow = await this.writeCreatedRow(target, path);
      const release = await this.r.wakeSlots.acquireWithin(this.r.config.admissionSlotWaitMs);
      if (!release) {
        this.r.logger.warn('admission: no slot came free; the pass replays and dispatches the run', { run_id: run.id });
        await this.leaveToPass(invoke, wroteRow);
        return 'no-slot';
      }
      let dispatched: { outcome: AdmissionOutcome; announced: Promise<void>[] };
      try {
        if (target.replay !== false) await this.cancelOn.replay(run);
        dispatched = await this.dispatch(target, path);
      } catch (err) {
        this.r.logger.warn('admission stopped before its dispatch; the pass tries again', { run_id: run.id, path, error: String(err) });
        await this.leaveToPass(invoke, wroteRow);
        return 'failed';
      } finally {
        release();
      }
      // The sweep waits, outside the slot, for the rows of the outcomes it committed (after their frames).
      if (path === 'sweep') await Promise.all(dispatched.announced);
      return dispatched.outcome;
    } finally {
      this.inFlight.delete(run.id);
    }
  }

  /** Whether an admission of `runId` is under way on this node. */
  isInFlight(runId: string): boolean {
    return this.inFlight.has(runId);
  }

  /**
   * The admission's rows: for a fire-and-forget invoke, the parent's `step.completed` row (`all`
   * profile), then the child's `run.created` row, stamped with its creation time so it sorts
   * first. A report or a new run waits for them (up to the recorder's 5 s budget each); a pass
   * waits at most `createdRowWaitMs` and lets them land after the dispatch. The orphan sweep
   * writes the row of a run no invocation links (a triggered, cron or debounced run of a function
   * with `cancelOn` whose admission a crash cut off) the same way, so a recovered run still gets
   * it; one whose admission wrote it before the crash keeps that row alone (the store takes one
   * `run.created` row per run and skips a second). Resolves whether rows were written here.
   */
  private async writeCreatedRow(target: AdmissionTarget, path: AdmissionPath): Promise<boolean> {
    const { invoke } = target;
    const wanted = path === 'report' || path === 'created'
      || (path === 'pass' && invoke !== null && !invoke.createdRow)
      || (path === 'sweep' && invoke === null && !target.run.parentRunId);
    if (!wanted) return false;
    const row = (async () => {
      if (invoke?.async) {
        const parent = { project: invoke.project, env: invoke.env, id: invoke.parentRunId, functionId: invoke.parentFunctionId };
        await recordStepRow(this.r, parent, { id: invoke.parentStepId, name: stepNameOf(invoke.parentRunId, invoke.parentStepId), status: 'completed' }, 'invoke');
      }
      return recordRunCreated(this.r, target.run);
    })();
    if (path !== 'pass' && path !== 'sweep') {
      await row;
      return true;
    }
    this.r.followUps.track('run-created-audit', () => row.then(() => undefined));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([row, new Promise((resolve) => { timer = setTimeout(resolve, this.r.config.createdRowWaitMs); })]);
    clearTimeout(timer);
    return true;
  }

  /** Notes, best effort, that the rows of an admission left to the pass are written, so the pass does not write them again. */
  private async leaveToPass(invoke: InvokeRow | null, wroteRow: boolean): Promise<void> {
    if (!invoke || !wroteRow || invoke.createdRow) return;
    try {
      await unitWithLockLimit(this.r.store, 'markCreatedRow', this.r.config.lockLimitMs, (tx) => invokesSql.markCreatedRow(tx, invoke.parentRunId, invoke.parentStepId));
    } catch (err) {
      this.r.logger.warn('admission: could not note its run.created row; the pass may write it again', { run_id: invoke.childRunId, error: String(err) });
    }
  }

  /**
   * The second read of the run and its dispatch, in one unit of work under the run's row lock:
   * releases it to the queue (or fails it for a refusal no retry can change, or cancels it quietly
   * when no parent waits on it), settles its invocation and resumes a fire-and-forget parent.
   */
  private async dispatch(target: AdmissionTarget, path: AdmissionPath): Promise<{ outcome: AdmissionOutcome; announced: Promise<void>[] }> {
    const recovery = path === 'pass' || path === 'sweep';
    // A report's admission of an invoked child may claim the child it releases.
    const reserved = path === 'report' && target.invoke !== null && this.atOnce?.reserve() === true;
    const { result: effect, dispatched } = await withReservedSlot(this.atOnce, reserved, (slot) =>
      this.r.store.unitOfWork('admitRun', async (tx) => {
        slot.segment = null;
        // A pass or the sweep gives up on a locked row (the store raises `LockTimeoutError`); the
        // report path waits on the child's row like its report did.
        if (recovery) await tx.setLockTimeout(this.r.config.lockLimitMs);
        // The freeze, and the run with its function under its row lock: one round trip on PostgreSQL.
        const { frozen, read: locked } = await runsSql.getRunWithFunctionIfThawed(tx, target.run.id);
        // A frozen instance admits nothing: the admission is left to the pass after the thaw.
        if (frozen) throw new InstanceFrozen();
        // The function of a run read here under its row lock, as this unit reads it.
        const functionOf = (read: RunRecord) => functionsSql.getFunction(tx, read.project, read.env, read.functionId);
        // A run whose admission is refused for good fails, only if unchanged since that read.
        const refuse = async (read: RunRecord, fn: FunctionRecord | null): Promise<RunRecord | null> => {
          const reason = admissionRefusal(read, fn);
          if (!reason) return null;
          return commitOutcome(tx, read.id, { status: 'failed', error: refusalError(reason) }, { kind: 'version', status: read.status, version: read.version });
        };
        const run = locked?.run ?? null;
        const done: AdmissionEffect = { outcome: 'ended' };
        const held = run !== null && !isTerminalRunStatus(run.status) && run.held;
        // Settled once, first: the edge write has the lock limit on every path (past it the unit rolls
        // back and the pass admits the child from the invocation, still pending). A sync invoke's held
        // child reads its parent's link with it (one round trip on PostgreSQL).
        if (target.invoke && !recovery) await tx.setLockTimeout(this.r.config.lockLimitMs);
        const edge = target.invoke ? await settleInvocation(tx, target.invoke, held && !target.invoke.async ? run : null) : { settled: false, link: undefined };
        if (held) {
          const unlinked = edge.link === undefined ? null : unlinkedReason(edge.link, run);
          if (unlinked) {
            done.quiet = await commitOutcome(tx, run.id, { status: 'cancelled', error: { message: `${unlinked}: no parent waits on run ${run.id}`, code: 'CANCELLED', retryable: false } }, { kind: 'not-terminal' });
            if (done.quiet) await runsSql.clearWakePending(tx, run.id);
            done.outcome = 'settled';
          } else {
            const fn = locked!.fn;
            const refused = await refuse(run, fn);
            if (refused) {
              done.refused = refused;
              done.outcome = 'refused';
            } else {
              // Claimed straight from `held` when it can be, else released to the queue.
              if (reserved && fn) slot.segment = await claimWaitEndAtOnce(this.r, tx, fn, run, 'held');
              if (slot.segment || (await runsSql.releaseHeld(tx, run.id))) {
                done.dispatched = run;
                done.outcome = 'dispatched';
              }
            }
          }
        } else if (run && !isTerminalRunStatus(run.status)) {
          done.outcome = 'dispatched'; // another admission released it
        }
        // A fire-and-forget parent resumes (its admission) with the settle, under the same lock limit.
        if (edge.settled && target.invoke?.async) {
          const parent = await runsSql.getRun(tx, target.invoke.parentRunId, { lock: true });
          if (parent && holdsOpenWait(parent)) {
            const refused = await refuse(parent, await functionOf(parent));
            if (refused) done.parentRefused = refused;
            // A paused parent keeps its pause and is queued on resume.
            else if ((await runsSql.queueContinuation(tx, parent.id)) === 'waiting_for_capacity') done.resumed = parent;
          }
        }
        return done;
      }),
    );
    if (!dispatched && effect.dispatched) this.hints.queued(effect.dispatched.project, effect.dispatched.env, effect.dispatched.mode);
    if (effect.resumed) this.hints.queued(effect.resumed.project, effect.resumed.env, effect.resumed.mode);
    const announced: Promise<void>[] = [];
    // The refused run was held: on a pass or the sweep its run.created row may still be on its way.
    if (effect.refused) announced.push(this.announcer.announce(effect.refused, 'admission-refused', { held: true }));
    if (effect.parentRefused) announced.push(this.announcer.announce(effect.parentRefused, 'admission-refused'));
    // Nobody waits on a run cancelled quietly: no frame, no audit row; a pass publishes `updated`.
    if (effect.quiet && recovery) void this.announcer.publishRunEvent(effect.quiet, 'updated');
    return { outcome: effect.outcome, announced };
  }

}

interface AdmissionEffect {
  outcome: AdmissionOutcome;
  dispatched?: RunRecord;
  refused?: RunRecord;
  quiet?: RunRecord | null;
  resumed?: RunRecord;
  parentRefused?: RunRecord;
}

/**
 * Why a sync invoke's held child has no parent waiting on it, or `null` while its parent's step
 * still waits on it: the step is gone or links another run (`invoke-link-failed`), the parent has
 * ended (`parent-ended`), or the step was ended by something else (`invoke-result-won`).
 */
function unlinkedReason(link: stepsSql.InvokeLink | null, child: RunRecord): string | null {
  if (!link || link.childRunId !== child.id) return 'invoke-link-failed';
  if (link.runStatus === null || isTerminalRunStatus(link.runStatus)) return 'parent-ended';
  if (link.status !== 'waiting') return 'invoke-result-won';
  return null;
}

/**
 * Settles the invocation `edge` (`settled`: whether this unit did, i.e. it was pending) and, for
 * `linkedChild` (a sync invoke's held child), reads its parent step's link in the same round trip
 * on PostgreSQL (`link`; `undefined` when not asked).
 */
async function settleInvocation(tx: Tx, edge: { parentRunId: string; parentStepId: string }, linkedChild: RunRecord | null): Promise<{ settled: boolean; link: stepsSql.InvokeLink | null | undefined }> {
  const settle = invokesSql.settleInvokeWrite(tx, edge.parentRunId, edge.parentStepId);
  if (!linkedChild) return { settled: (await tx.query(settle.sql, settle.params)).length === 1, link: undefined };
  const [settled, link] = await tx.queryTogether([settle, stepsSql.invokeLinkRead(linkedChild.parentRunId!, linkedChild.parentStepId!)]);
  return { settled: settled.length === 1, link: stepsSql.invokeLinkIn(link) };
}

/**
 * Why `run` cannot be admitted to the queue, for a reason no retry can change (specification, "A
 * resume's admission can fail in two ways"): a push run whose function has no endpoint URL, or an
 * execution mode the engine does not support. `null` when it can be admitted. Anything else that
 * goes wrong (a lock timeout, a store error) is retryable: the caller leaves the run as it was.
 */
export function admissionRefusal(run: RunRecord, fn: FunctionRecord | null): string | null {
  if (run.mode !== 'push' && run.mode !== 'pull') return `execution mode ${JSON.stringify(run.mode)} is not supported`;
  if (run.mode === 'push' && fn && !fn.definition.endpointUrl) {
    return `function ${run.functionId} (version ${fn.version}) has no endpoint URL, so its push run cannot be dispatched`;
  }
  return null;
}

/** The stored error of a run whose admission was refused. */
export function refusalError(reason: string): RunError {
  return { message: `admission refused: ${reason}`, code: RUN_ERROR_CODES.ADMISSION_REFUSED, retryable: false };
}
