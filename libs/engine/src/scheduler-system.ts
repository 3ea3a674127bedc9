import { isTerminalRunStatus } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { StepRecord, authoritySql, correlationsSql, runsSql, stepsSql } from '@ironflow/store';
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
 * The scheduler's tick (DESIGN.md `scheduler`): the sleep sweep, the invoke and wait timeout
 * sweeps, the cron and debounce passes and the orphan sweep every tick; the waiting-run pass, the
 * pending-invocation pass and the `cancel_on` cleanup and reconcile every `waitingPassEveryTicks` ticks. Each
 * row is its own unit of work, so a bad row costs only itself (principle 5). While the instance is
 * frozen the passes that admit work (sleeps, timeouts, orphans, waiting runs, pending invocations)
 * are skipped; cron and debounce still create runs, which wait in the queue for the thaw.
 */
export class SchedulerSystem {
  private ticks = 0;

  constructor(
    private readonly r: EngineResources,
    private readonly wakes: WakeSystem,
    private readonly announcer: OutcomeAnnouncer,
    private readonly hints: DispatchHints,
    private readonly cron: CronSystem,
    private readonly debounces: DebounceSystem,
    private readonly passes: AdmissionPasses,
  ) {}

  /** One tick; `signal` (the engine stopping) ends the passes' loops, not the wakes and admissions they started. */
  async tick(signal?: AbortSignal): Promise<void> {
    this.ticks += 1;
    // A frozen instance admits nothing: the passes that admit work wait the freeze out (each of
    // their units also checks, under the authority row's lock, in case a freeze lands meanwhile).
    const frozen = await this.r.store.read('readAuthority', (tx) => authoritySql.readAuthority(tx)).then((a) => a.state === 'frozen', () => false);
    if (!frozen) {
      await this.guard('sleep sweep', () => this.sleepSweep());
      await this.guard('timeout sweep', () => this.timeoutSweep());
    }
    await this.guard('cron pass', () => this.cron.pass());
    await this.guard('debounce pass', () => this.debounces.pass());
    if (!frozen) await this.guard('orphan sweep', () => this.passes.orphans.run(signal));
    if (this.ticks % this.r.config.waitingPassEveryTicks === 0) {
      if (!frozen) {
        await this.guard('waiting-run pass', () => this.wakes.waitingRunPass(signal));
        await this.guard('pending-invocation pass', () => this.passes.pendingInvokes.run(signal));
      }
      await this.guard('cancel_on cleanup', () => this.passes.cancelOn.cleanUp());
      await this.guard('cancel_on reconcile', () => this.passes.cancelOn.reconcile());
    }
  }

  /**
   * Wakes runs whose sleep is due. Returns how many were queued. Each wakeup finishes the step and
   * queues the run in one unit of work that gives up on a lock after `wakeLockTimeoutMs` (the step
   * row, the run row, the instance authority row) and changes nothing; the sweep moves on to the
   * next sleep. During a freeze nothing wakes: the sweep stops and its sleeps wait for the thaw.
   */
  async sleepSweep(): Promise<number> {
    const due = await this.r.store.read('listDueSleeps', (tx) => stepsSql.listDueSleeps(tx, this.r.config.passPageSize));
    let queued = 0;
    for (const step of due) {
      try {
        const run = await this.r.store.unitOfWork('wakeSleep', async (tx) => {
          await tx.setLockTimeout(this.r.config.wakeLockTimeoutMs);
          await assertThawed(tx);
          if (!(await stepsSql.endWaitingStep(tx, step.runId, step.stepId, 'completed'))) return null;
          return (await runsSql.queueContinuation(tx, step.runId)) ? runsSql.getRun(tx, step.runId) : null;
        });
        if (run) { queued += 1; this.hints.queued(run.project, run.env, run.mode); }
      } catch (err) {
        if (err instanceof InstanceFrozen) break;
        this.r.logger.warn('sleep wakeup gave up; a later sweep wakes it', { run_id: step.runId, step_id: step.stepId, error: String(err) });
      }
    }
    return queued;
  }

  /**
   * Ends waits whose timeout passed. A timed-out invoke resumes a push run (the SDK throws
   * "invoke timed out") and fails a pull run with `INVOKE_FAILED`, which pull cannot express;
   * a timed-out `waitForEvent` fails the run with `EVENT_WAIT_TIMED_OUT`, because the SDK has no
   * representation for it (WIRE-PROTOCOL.md section 7, decision 4). Each outcome's frame goes out
   * first; then the sweep waits for its audit row before the next step (specification, "A stuck
   * store cannot take the pool": the scheduler's sweeps write one row at a time).
   */
  async timeoutSweep(): Promise<number> {
    const due = await this.r.store.read('listDueTimeouts', async (tx) => [
      ...(await stepsSql.listDueTimeouts(tx, 'invoke', this.r.config.passPageSize)),
      ...(await stepsSql.listDueTimeouts(tx, 'wait_for_event', this.r.config.passPageSize)),
    ]);
    for (const step of due) {
      try {
        await this.timeOut(step);
      } catch (err) {
        if (err instanceof InstanceFrozen) break;
        this.r.logger.warn('wait timeout gave up; a later sweep ends it', { run_id: step.runId, step_id: step.stepId, error: String(err) });
      }
    }
    return due.length;
  }

  /**
   * Ends one wait whose timeout passed. An invoke whose child has already ended is not timed out:
   * the child's outcome is applied instead (a wake may simply not have run yet). A child still
   * running when its invoke times out is cancelled in the same unit of work, so a recovered
   * execution of it cannot run again after its parent gave up on it.
   */
  private async timeOut(step: StepRecord): Promise<void> {
    const effect = await this.r.store.unitOfWork('stepTimeout', async (tx) => {
      await tx.setLockTimeout(this.r.config.wakeLockTimeoutMs);
      await assertThawed(tx);
      const run = await runsSql.getRun(tx, step.runId, { lock: true });
      const child = step.type === 'invoke' && step.childRunId ? await runsSql.getRun(tx, step.childRunId, { lock: true }) : null;
      if (child && isTerminalRunStatus(child.status) && run && holdsOpenWait(run)) return { endedChild: child };
      // The step is ended whatever became of its run, so a run that ended while waiting (a
      // cancel) leaves no step due forever in front of live ones.
      if (!(await stepsSql.endWaitingStep(tx, step.runId, step.stepId, 'timed_out'))) return null;
      if (step.type === 'wait_for_event') await correlationsSql.closeCorrelationsOfRun(tx, step.runId);
      const cancelledChild = child && !isTerminalRunStatus(child.status)
        ? await commitOutcome(tx, child.id, { status: 'cancelled', error: { message: `the parent's invoke of this run timed out (step ${step.stepId})`, code: 'INVOKE_TIMED_OUT', retryable: false } }, { kind: 'not-terminal' })
        : null;
      if (!run || !holdsOpenWait(run)) return { cancelledChild };
      if (step.type === 'invoke' && run.mode === 'push') {
        return { cancelledChild, queued: (await runsSql.queueContinuation(tx, run.id)) ? run : null };
      }
      const error = step.type === 'invoke'
        ? { message: `invoked run ${step.childRunId} did not finish before the invoke timeout`, code: 'INVOKE_FAILED', retryable: false, child_run_id: step.childRunId ?? undefined }
        : { message: `step ${step.stepId} waited for an event past its timeout`, code: 'EVENT_WAIT_TIMED_OUT', retryable: false };
      const failed = await commitOutcome(tx, run.id, { status: 'failed', error }, { kind: 'version', status: run.status, version: run.version });
      return { cancelledChild, failed };
    });
    if (!effect) return;
    if (effect.endedChild) {
      await this.wakes.wakeParent(effect.endedChild);
      return;
    }
    // Frames first, then the sweep waits for the rows (one timed-out step at a time).
    const announced: Promise<void>[] = [];
    if (effect.cancelledChild) announced.push(this.announcer.announce(effect.cancelledChild, 'step-timeout'));
    if (effect.queued) this.hints.queued(effect.queued.project, effect.queued.env, effect.queued.mode);
    if (effect.failed) announced.push(this.announcer.announce(effect.failed, 'step-timeout'));
    await Promise.all(announced);
  }

  private async guard(name: string, work: () => Promise<unknown>): Promise<void> {
    try {
      await work();
    } catch (err) {
      this.r.logger.warn(`scheduler ${name} failed; it runs again next tick`, { error: String(err) });
    }
  }
}
