import { isTerminalRunStatus } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { StepRecord, authoritySql, correlationsSql, runsSql, stepsSql, unitWithLockLimit } from '@ironflow/store';
import { CronSystem } from './cron-system';
import { DebounceSystem } from './debounce-system';
import { DispatchHints } from './dispatch-hints';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';
import { WakeSystem } from './wake-system';
import { CancelOnSystem } from './cancel-on-system';
import { OrphanSweep } from './orphan-sweep';
import { PendingInvokePass } from './pending-invoke-pass';

/** The recovery passes of invoke admission and `cancel_on` the tick also runs. */
export interface AdmissionPasses {
  pendingInvokes: PendingInvokePass;
  orphans: OrphanSweep;
  cancelOn: CancelOnSystem;
}
import { holdsOpenWait } from './pause-announcer';
import { InstanceFrozen, assertThawed } from './instance-control';

/**
 * The scheduler (DESIGN.md `scheduler`), as three loops on their own timers, so a stall in one
 * does not stop the others (specification, "The pass has its own goroutine"):
 * - `tick`, every `tickMs`: the invoke and wait timeout sweeps, the cron and debounce passes and
 *   the orphan sweep;
 * - `sleepTick`, every `tickMs`: the sleep sweep, and the stale-claim recovery every
 *   `staleClaimRecoveryEveryMs`;
 * - `passTick`, every `waitingPassEveryTicks` ticks: the waiting-run pass, the pending-invocation
 *   pass and the `cancel_on` cleanup and reconcile (a cancel is allowed during a freeze).
 * Each row is its own unit of work, which gives up on a locked row after `lockLimitMs` on
 * PostgreSQL (`unitWithLockLimit`), changing nothing, so a bad or locked row costs only itself
 * (principle 5) and a later pass finishes it. While the instance is frozen the passes that admit
 * work (sleeps and the stale-claim recovery, timeouts, orphans, waiting runs, pending invocations)
 * are skipped; cron and debounce still create runs, which wait in the queue for the thaw.
 */
export class SchedulerSystem {
  private lastClaimRecovery = 0;

  constructor(
    private readonly r: EngineResources,
    private readonly wakes: WakeSystem,
    private readonly announcer: OutcomeAnnouncer,
    private readonly hints: DispatchHints,
    private readonly cron: CronSystem,
    private readonly debounces: DebounceSystem,
    private readonly passes: AdmissionPasses,
  ) {}

  /** The main loop's tick; `signal` (the engine stopping) ends the orphan sweep's loop, not the admissions it started. */
  async tick(signal?: AbortSignal): Promise<void> {
    const frozen = await this.frozen();
    if (!frozen) await this.guard('timeout sweep', () => this.timeoutSweep());
    await this.guard('cron pass', () => this.cron.pass());
    await this.guard('debounce pass', () => this.debounces.pass());
    if (!frozen) await this.guard('orphan sweep', () => this.passes.orphans.run(signal));
  }

  /**
   * Whether the instance is frozen, read once a tick (a read that fails counts as thawed: each unit
   * of the passes also checks, under the authority row's lock, in case a freeze lands meanwhile).
   */
  private frozen(): Promise<boolean> {
    return this.r.store.read('readAuthority', (tx) => authoritySql.readAuthority(tx)).then((a) => a.state === 'frozen', () => false);
  }

  /** The sleep loop's tick: the sleep sweep, then the stale-claim recovery when it is due. */
  async sleepTick(): Promise<void> {
    if (await this.frozen()) return;
    await this.guard('sleep sweep', () => this.sleepSweep());
    const now = this.r.clock.now();
    if (now - this.lastClaimRecovery >= this.r.config.staleClaimRecoveryEveryMs) {
      this.lastClaimRecovery = now;
      await this.guard('stale-claim recovery', () => this.staleClaimRecovery());
    }
  }

  /** The pass loop's tick; `signal` ends the passes' loops, not the wakes and admissions they started. */
  async passTick(signal?: AbortSignal): Promise<void> {
    if (!(await this.frozen())) {
      await this.guard('waiting-run pass', () => this.wakes.waitingRunPass(signal));
      await this.guard('pending-invocation pass', () => this.passes.pendingInvokes.run(signal));
    }
    await this.guard('cancel_on cleanup', () => this.passes.cancelOn.cleanUp());
    await this.guard('cancel_on reconcile', () => this.passes.cancelOn.reconcile());
  }

  /**
   * Wakes runs whose sleep is due (specification, "A sleep wakeup gives up on a lock after 1 s").
   * The sweep claims a page of due sleeps (on PostgreSQL, skipping locked step rows), then wakes
   * each in its own unit of work: the step completed and the run queued together, under the lock
   * limit. A wakeup that gives up changes nothing and the sweep moves on to the next sleep; the
   * claim stays until the stale-claim recovery frees it and a later sweep wakes the run. Returns
   * how many runs were queued.
   */
  async sleepSweep(): Promise<number> {
    const due = await unitWithLockLimit(this.r.store, 'claimDueSleeps', this.r.config.lockLimitMs, (tx) => stepsSql.claimDueSleeps(tx, this.r.config.passPageSize));
    let queued = 0;
    for (const step of due) {
      await this.r.pausePoints.reached('sleep.beforeWake', step.runId);
      try {
        const run = await unitWithLockLimit(this.r.store, 'wakeSleep', this.r.config.lockLimitMs, async (tx) => {
          await assertThawed(tx);
          if (!(await stepsSql.endWaitingStep(tx, step.runId, step.stepId, 'completed'))) return null;
          return (await runsSql.queueContinuation(tx, step.runId)) ? runsSql.getRun(tx, step.runId) : null;
        });
        if (run) { queued += 1; this.hints.queued(run.project, run.env, run.mode); }
      } catch (err) {
        if (err instanceof InstanceFrozen) {
          // During a freeze nothing wakes: the page's claims are freed so the first sweep after the thaw wakes them.
          await this.guard('release of frozen sleep claims', () => unitWithLockLimit(this.r.store, 'releaseSleepClaims', this.r.config.lockLimitMs, (tx) => stepsSql.releaseClaims(tx, due)));
          break;
        }
        this.r.logger.warn('sleep wakeup gave up; its claim is freed by the stale-claim recovery and a later sweep wakes it', { run_id: step.runId, step_id: step.stepId, error: String(err) });
      }
    }
    return queued;
  }

  /**
   * The stale-claim recovery: frees sleep claims older than `staleClaimMs` (a wakeup that gave up,
   * a node that died mid-sweep), a page at a time, skipping rows another transaction holds (the
   * next run retries them). Returns how many claims were freed.
   */
  async staleClaimRecovery(): Promise<number> {
    let freed = 0;
    for (;;) {
      const page = await unitWithLockLimit(this.r.store, 'releaseStaleClaims', this.r.config.lockLimitMs, (tx) =>
        stepsSql.releaseStaleClaims(tx, tx.now - this.r.config.staleClaimMs, this.r.config.passPageSize));
      freed += page;
      if (page < this.r.config.passPageSize) return freed;
    }
  }

  /**
   * Ends waits whose timeout passed (an invoke step whose child has ended is left to its wake for
   * `invokeGraceMs`). A timed-out invoke resumes a push run (the SDK throws "invoke timed out") and
   * fails a pull run with `INVOKE_FAILED`, which pull cannot express; a timed-out `waitForEvent`
   * fails the run with `EVENT_WAIT_TIMED_OUT`, because the SDK has no representation for it
   * (WIRE-PROTOCOL.md section 7, decision 4). Each step is its own unit of work under the lock
   * limit; one that gives up is left as it was, and the sweep moves on. Each outcome's frame goes
   * out first; then the sweep waits for its audit row before the next step (specification, "A
   * stuck store cannot take the pool": the scheduler's sweeps write one row at a time). Returns how
   * many steps it handled.
   */
  async timeoutSweep(): Promise<number> {
    const due = await this.r.store.read('listDueTimeouts', async (tx) => [
      ...(await stepsSql.listDueTimeouts(tx, 'invoke', tx.now - this.r.config.invokeGraceMs, this.r.config.passPageSize)),
      ...(await stepsSql.listDueTimeouts(tx, 'wait_for_event', tx.now - this.r.config.invokeGraceMs, this.r.config.passPageSize)),
    ]);
    let handled = 0;
    for (const step of due) {
      try {
        if (await this.timeOut(step)) handled += 1;
      } catch (err) {
        if (err instanceof InstanceFrozen) break;
        this.r.logger.warn('step timeout gave up; the next sweep tries again', { run_id: step.runId, step_id: step.stepId, error: String(err) });
      }
    }
    return handled;
  }

  /**
   * Ends one wait whose timeout passed, under the lock limit; resolves whether it ended the step.
   * An invoke whose child has already ended is not timed out within `invokeGraceMs` past its
   * timeout: its wake applies the child's outcome (the waiting-run pass finishes a wake that was
   * lost). Past the grace it times out, which is how a parent ends when its wake can never land. A
   * child still running when its invoke times out is cancelled in the same unit of work, so a
   * recovered execution of it cannot run again after its parent gave up on it.
   */
  private async timeOut(step: StepRecord): Promise<boolean> {
    const effect = await unitWithLockLimit(this.r.store, 'stepTimeout', this.r.config.lockLimitMs, async (tx) => {
      await assertThawed(tx);
      const run = await runsSql.getRun(tx, step.runId, { lock: true });
      const child = step.type === 'invoke' && step.childRunId ? await runsSql.getRun(tx, step.childRunId, { lock: true }) : null;
      if (child && isTerminalRunStatus(child.status) && (step.timeoutAt ?? 0) > tx.now - this.r.config.invokeGraceMs) return null;
      // The step is ended whatever became of its run, so a run that ended while waiting (a
      // cancel) leaves no step due forever in front of live ones.
      if (!(await stepsSql.endWaitingStep(tx, step.runId, step.stepId, 'timed_out'))) return null;
      if (step.type === 'wait_for_event') await correlationsSql.closeCorrelationsOfRun(tx, step.runId);
      const cancelledChild = child && !isTerminalRunStatus(child.status)
        ? await commitOutcome(tx, child.id, { status: 'cancelled', error: { message: `the parent's invoke of this run timed out (step ${step.stepId})`, code: 'INVOKE_TIMED_OUT', retryable: false } }, { kind: 'not-terminal' })
        : null;
      const childHeld = child?.held ?? false;
      if (!run || !holdsOpenWait(run)) return { cancelledChild, childHeld };
      if (step.type === 'invoke' && run.mode === 'push') {
        return { cancelledChild, childHeld, queued: (await runsSql.queueContinuation(tx, run.id)) ? run : null };
      }
      const error = step.type === 'invoke'
        ? { message: `invoked run ${step.childRunId} did not finish before the invoke timeout`, code: 'INVOKE_FAILED', retryable: false, child_run_id: step.childRunId ?? undefined }
        : { message: `step ${step.stepId} waited for an event past its timeout`, code: 'EVENT_WAIT_TIMED_OUT', retryable: false };
      const failed = await commitOutcome(tx, run.id, { status: 'failed', error }, { kind: 'version', status: run.status, version: run.version });
      return { cancelledChild, childHeld, failed };
    });
    if (!effect) return false;
    // Frames first, then the sweep waits for the rows (one timed-out step at a time).
    const announced: Promise<void>[] = [];
    if (effect.cancelledChild) announced.push(this.announcer.announce(effect.cancelledChild, 'step-timeout', { held: effect.childHeld }));
    if (effect.queued) this.hints.queued(effect.queued.project, effect.queued.env, effect.queued.mode);
    if (effect.failed) announced.push(this.announcer.announce(effect.failed, 'step-timeout'));
    await Promise.all(announced);
    return true;
  }

  private async guard(name: string, work: () => Promise<unknown>): Promise<void> {
    try {
      await work();
    } catch (err) {
      this.r.logger.warn(`scheduler ${name} failed; it runs again next tick`, { error: String(err) });
    }
  }
}
