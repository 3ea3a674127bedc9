import { CallScope, EngineError, isTerminalRunStatus } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { RunRecord, Tx, correlationsSql, runsSql, stepsSql, unitWithLockLimit } from '@ironflow/store';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';
import { holdsOpenWait } from './pause-announcer';

/**
 * A user cancel (WIRE-PROTOCOL.md 5.2 `CancelRun`). A cancel and a completion that race are
 * decided by the same row: whichever commits first wins, the other changes nothing, and the
 * answer is the run as it stands, so the caller sees which outcome won. A cancelled parent that
 * was waiting on a `step.invoke` also cancels that child (and so on down), off the caller's path:
 * nobody waits for its result any more. Children started with `invokeAsync` run on. Throws
 * `RUN_NOT_FOUND`, `VALIDATION_ERROR` (no id).
 */
export class CancelSystem {
  constructor(private readonly r: EngineResources, private readonly announcer: OutcomeAnnouncer) {}

  async cancel(scope: CallScope, runId: string, reason: string): Promise<RunRecord> {
    if (typeof runId !== 'string' || runId === '') throw new EngineError('VALIDATION_ERROR', 'id: a run id is required');
    return this.r.followUps.during(() => this.commitCancel(scope, runId, reason));
  }

  private async commitCancel(scope: CallScope, runId: string, reason: string): Promise<RunRecord> {
    // Bounded: on a locked run row the call gives up at the lock limit with UNAVAILABLE (retry), nothing changed.
    const result = await unitWithLockLimit(this.r.store, 'cancelRun', this.r.config.lockLimitMs, async (tx) => {
      const run = await runsSql.getRun(tx, runId, { lock: true });
      if (!run || run.project !== scope.project || run.env !== scope.env) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`);
      if (isTerminalRunStatus(run.status)) return { run, committed: false, held: false, awaitedChildren: [] as string[] };
      await this.r.pausePoints.reached('cancel.afterRead', runId);
      const committed = await commitOutcome(
        tx,
        runId,
        { status: 'cancelled', error: { message: reason || 'cancelled by user', code: 'CANCELLED', retryable: false } },
        { kind: 'not-terminal' },
      );
      if (committed) return { run: committed, committed: true, held: run.held, awaitedChildren: await closeWaitsOfCancelled(tx, run) };
      return { run: (await runsSql.getRun(tx, runId))!, committed: false, held: false, awaitedChildren: [] as string[] };
    });
    this.cancelAwaitedChildren(result.run, result.awaitedChildren);
    // A user cancel's call waits for its audit row, after the frame (specification, "Audit").
    // A held run's `run.created` row goes first (its admission may not have written it yet).
    if (result.committed) await this.announcer.announce(result.run, 'user-cancel', { held: result.held });
    return result.run;
  }

  /** Cancels, off the caller's path, the children a cancelled run waited on through a sync `step.invoke` (and so on down). */
  cancelAwaitedChildren(cancelled: RunRecord, childIds: string[]): void {
    for (const childId of childIds) {
      this.r.followUps.track('cancel-child', async () => {
        await this.commitCancel({ project: cancelled.project, env: cancelled.env }, childId, `parent run ${cancelled.id} was cancelled`);
      });
    }
  }
}

/**
 * In the unit of work that cancelled `run` (as read there, before the cancel): closes the open
 * `waitForEvent` correlations of a run that held a wait (waiting, or paused while waiting) and
 * returns the children it waited on through a sync `step.invoke`, for `cancelAwaitedChildren`.
 */
export async function closeWaitsOfCancelled(tx: Tx, run: RunRecord): Promise<string[]> {
  if (!holdsOpenWait(run)) return [];
  await correlationsSql.closeCorrelationsOfRun(tx, run.id);
  return stepsSql.listWaitingInvokeChildren(tx, run.id);
}
