import { runFields } from '@ironflow/observability';
import { RunError, isTerminalRunStatus } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { RunRecord, authoritySql, runsSql, stepsSql, unitWithLockLimit } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { DispatchAtOnce, claimWaitEndAtOnce, withReservedSlot } from './dispatch-at-once';
import { admissionRefusal, refusalError } from './invoke-admission';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';
import { holdsOpenWait } from './pause-announcer';
import { stepNameOf } from './step-name';
import { recordStepRow } from './step-audit';

/**
 * The parent wake (specification, "A parent run is woken once"). It copies a child's committed
 * outcome onto the parent's invoke step only while that step is `waiting`, belongs to the child's
 * parent and links this child, and queues the parent only from `waiting`. Over pull, where the
 * worker cannot receive a failed step, a failed or cancelled child fails the parent with
 * `INVOKE_FAILED` naming the child. A second wake changes nothing. The child's `wake_pending`
 * flag is cleared in the same unit of work, so the waiting-run pass reads only lost wakes.
 *
 * Queueing the parent again is its admission: a refusal no retry can change (`admissionRefusal`)
 * fails the parent instead, with the step's result, in one unit of work that commits only if the
 * parent is unchanged since the wake read it; the failure is announced like any other, which wakes
 * the parent's own parent. Any other error leaves the parent `waiting` and the wake pending, with
 * nothing written, for the waiting-run pass to try again.
 *
 * A wake from a child's commit on a node that dispatches push claims the parent it queued in the
 * same unit of work when a push slot is free ({@link claimWaitEndAtOnce}), and calls its endpoint
 * after the commit: the parent's next segment needs no hint and no claim of its own (issue 11).
 */
export class WakeSystem {
  private atOnce?: DispatchAtOnce;

  constructor(
    private readonly r: EngineResources,
    private readonly announcer: OutcomeAnnouncer,
    private readonly hints: DispatchHints,
  ) {}

  /** Wired by the engine once its push dispatcher exists. */
  setDispatchAtOnce(atOnce: DispatchAtOnce): void {
    this.atOnce = atOnce;
  }

  /**
   * The wake from a child's commit: waits for a slot, applies, and releases the slot before the
   * invoke step's audit row (specification, "A stuck store cannot take the pool").
   */
  async wakeParent(child: RunRecord): Promise<void> {
    const parent = await this.r.wakeSlots.run(() => this.apply(child, 'commit'));
    if (parent) await this.recordInvokeStep(child, parent);
  }

  /**
   * The invoke step's `step.completed` / `step.failed` row, written after the wake resumed (or
   * failed) the parent and outside its slot, so the parent never waits for it; the row itself
   * takes a slot of the recorder, like every audit row.
   */
  private async recordInvokeStep(child: RunRecord, parent: RunRecord): Promise<void> {
    const failed = child.status !== 'completed';
    await recordStepRow(this.r, parent, {
      id: child.parentStepId!,
      name: stepNameOf(parent.id, child.parentStepId!),
      status: failed ? 'failed' : 'completed',
      ...(failed ? { error: { message: child.error?.message ?? `child run ${child.status}` } } : {}),
    }, 'wake');
  }

  /** Applies the wake; returns the parent whose invoke step it finished, or `null`. */
  private async apply(child: RunRecord, path: 'commit' | 'pass'): Promise<RunRecord | null> {
    if (!child.parentRunId || !child.parentStepId || !isTerminalRunStatus(child.status)) return null;
    const parentRunId = child.parentRunId;
    const parentStepId = child.parentStepId;
    const failed = child.status !== 'completed';
    const stepResult = [failed ? 'failed' : 'completed', failed ? null : child.output, failed ? invokeStepError(child) : null] as const;
    // A wake from the commit may claim the parent it queues (a pass leaves it to the claim loop).
    const reserved = path === 'commit' && this.atOnce?.reserve() === true;
    const { result: effect, dispatched } = await withReservedSlot(this.atOnce, reserved, (slot) =>
      unitWithLockLimit(this.r.store, 'wakeParent', this.r.config.lockLimitMs, async (tx): Promise<WakeEffect> => {
        slot.segment = null;
        // The freeze, and the parent with its function under its row lock: one round trip on PostgreSQL.
        const { frozen, read } = await runsSql.getRunWithFunctionIfThawed(tx, parentRunId);
        // A frozen instance resumes nothing: the wake stays pending for the pass after the thaw.
        if (frozen) return { failedParent: null, queued: null, resolved: null, frozen: true };
        const parent = read?.run ?? null;
        await this.r.pausePoints.reached('wake.afterRead', parentRunId);
        if (!parent || isTerminalRunStatus(parent.status)) {
          await runsSql.clearWakePending(tx, child.id);
          return { failedParent: null, queued: null, resolved: null };
        }
        const failsParent = failed && parent.mode === 'pull' && holdsOpenWait(parent);
        const fn = !failsParent && holdsOpenWait(parent) ? read!.fn : null;
        const refusal = !failsParent && holdsOpenWait(parent) ? admissionRefusal(parent, fn) : null;
        // A refused resume writes nothing here: its failure commits below, guarded by this read.
        if (refusal) return { failedParent: null, queued: null, resolved: null, refused: { parent, reason: refusal } };
        // Clears the child's wake_pending too, resolved or not.
        const resolved = await stepsSql.resolveInvokeStep(tx, parent.id, parentStepId, child.id, ...stepResult);
        let failedParent: RunRecord | null = null;
        let queued: RunRecord | null = null;
        if (resolved && failsParent) {
          // A paused parent still fails: its wait failed (the pause only holds its next segment).
          failedParent = await commitOutcome(tx, parent.id, { status: 'failed', error: invokeFailure(child) }, {
            kind: 'version',
            status: parent.status,
            version: parent.version,
          });
        } else if (resolved) {
          // Claimed straight from `waiting` when it can be, else queued (a paused parent keeps its pause).
          if (reserved && fn) slot.segment = await claimWaitEndAtOnce(this.r, tx, fn, parent, 'waiting');
          if (slot.segment || (await runsSql.queueContinuation(tx, parent.id))) queued = parent;
        }
        return { failedParent, queued, resolved: resolved ? parent : null };
      }),
    );
    if (effect.frozen) {
      this.r.logger.warn('parent wake held by a frozen instance; the waiting-run pass applies it after the thaw', { ...runFields(child), parent_run_id: parentRunId });
      return null;
    }
    if (effect.refused) {
      effect.failedParent = await this.refuseResume(child, effect.refused.parent, effect.refused.reason, stepResult);
      effect.resolved = effect.failedParent ? effect.refused.parent : null;
    }
    if (effect.failedParent) void this.announcer.announce(effect.failedParent, effect.refused ? 'admission-refused' : 'invoke-failed');
    if (effect.queued && !dispatched) this.hints.queued(effect.queued.project, effect.queued.env, effect.queued.mode);
    if (effect.failedParent || effect.queued) this.r.metrics.parentWakes.inc({ path });
    return effect.resolved;
  }

  /**
   * Fails a parent whose resume was refused, with its invoke step's result, in one unit of work,
   * only if the parent is unchanged since the wake read it (an outcome committed meanwhile wins).
   */
  private async refuseResume(
    child: RunRecord,
    parent: RunRecord,
    reason: string,
    stepResult: readonly ['failed' | 'completed', unknown, string | null],
  ): Promise<RunRecord | null> {
    await this.r.pausePoints.reached('admission.afterRead', parent.id);
    return unitWithLockLimit(this.r.store, 'refuseResume', this.r.config.lockLimitMs, async (tx) => {
      // During a freeze the failure stays pending (the wake too) and lands after the thaw.
      if (await authoritySql.isFrozen(tx)) return null;
      const failed = await commitOutcome(tx, parent.id, { status: 'failed', error: refusalError(reason) }, { kind: 'version', status: parent.status, version: parent.version });
      if (!failed) return null;
      await stepsSql.resolveInvokeStep(tx, parent.id, child.parentStepId!, child.id, ...stepResult);
      return failed;
    });
  }

  private passCursor = '';

  /**
   * The waiting-run pass (specification, "A parent run is woken once"), run every 10 scheduler
   * ticks. It first reads ended children whose wake never applied (`wake_pending`, a partial
   * index, so recovery costs in proportion to the lost wakes, not to the waiting runs), then the
   * next page of waiting parents after its cursor (the specification's pass). It skips a parent
   * whose execution holds a lease, and a wake for which no slot is free (a later pass comes
   * back). Each wake it starts runs as a tracked follow-up that `signal` cannot end; the pass
   * itself stops starting wakes once `signal` aborts. Returns the wakes started.
   */
  async waitingRunPass(signal?: AbortSignal): Promise<number> {
    const page = this.r.config.passPageSize;
    const lost = await this.r.store.read('listWakePending', (tx) => runsSql.listWakePending(tx, page));
    const { waits, nextCursor } = await this.r.store.read('pageEndedInvokeWaits', (tx) => stepsSql.pageEndedInvokeWaits(tx, this.passCursor, page));
    this.passCursor = nextCursor ?? '';
    const children = new Map(lost.map((child) => [child.id, child]));
    const fromPage = waits.filter((w) => !w.parentLeased && !children.has(w.childRunId)).map((w) => w.childRunId);
    if (fromPage.length) {
      for (const child of await this.r.store.read('getChildren', (tx) => runsSql.getRuns(tx, fromPage))) children.set(child.id, child);
    }
    let started = 0;
    for (const child of children.values()) {
      if (signal?.aborted) break;
      const release = await this.r.wakeSlots.tryAcquire();
      if (!release) {
        this.r.logger.warn('waiting-run pass: no slot free; the wake waits for the next pass', { ...runFields(child), parent_run_id: child.parentRunId });
        continue;
      }
      started += 1;
      this.r.followUps.track('parent-wake-pass', async () => {
        let parent: RunRecord | null;
        try {
          parent = await this.apply(child, 'pass');
        } finally {
          release();
        }
        if (parent) await this.recordInvokeStep(child, parent);
      });
    }
    return started;
  }
}

/** What a wake's unit of work did: failed or queued the parent, or found its resume refused (nothing written). */
interface WakeEffect {
  failedParent: RunRecord | null;
  queued: RunRecord | null;
  /** The parent whose invoke step the wake finished. */
  resolved: RunRecord | null;
  refused?: { parent: RunRecord; reason: string };
  /** The instance is frozen: nothing was written. */
  frozen?: boolean;
}

/** The failed invoke step's `error`, a JSON string the SDK parses (WIRE-PROTOCOL.md 1.3). */
function invokeStepError(child: RunRecord): string {
  return JSON.stringify({
    function_id: child.functionId,
    child_run_id: child.id,
    cause: child.error?.message ?? `child run ${child.status}`,
    message: child.error?.message ?? `child run ${child.status}`,
  });
}

function invokeFailure(child: RunRecord): RunError {
  return {
    message: `invoked function ${child.functionId} (run ${child.id}) ${child.status}: ${child.error?.message ?? 'no error message'}`,
    code: 'INVOKE_FAILED',
    retryable: false,
    child_run_id: child.id,
    function_id: child.functionId,
  };
}
