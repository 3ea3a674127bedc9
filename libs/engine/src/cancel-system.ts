import { CallScope, EngineError, isTerminalRunStatus } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { RunRecord, correlationsSql, runsSql, stepsSql } from '@ironflow/store';
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
    const result = await this.r.store.unitOfWork('cancelRun', async (tx) => {
      const run = await runsSql.getRun(tx, runId, { lock: true });
      if (!run || run.project !== scope.project || run.env !== scope.env) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`);
      if (isTerminalRunStatus(run.status)) return { run, committed: false, awaitedChildren: [] as string[] };
      await this.r.pausePoints.reached('cancel.afterRead', runId);
      const committed = await commitOutcome(
        tx,
        runId,
        { status: 'cancelled', error: { message: reason || 'cancelled by user', code: 'CANCELLED', retryable: false } },
        { kind: 'not-terminal' },
      );
      if (committed) {
        if (holdsOpenWait(run)) await correlationsSql.closeCorrelationsOfRun(tx, runId);
        const awaitedChildren = holdsOpenWait(run) ? await stepsSql.listWaitingInvokeChildren(tx, runId) : [];
        return { run: committed, committed: true, awaitedChildren };
      }
      return { run: (await runsSql.getRun(tx, runId))!, committed: false, awaitedChildren: [] as string[] };
    });
    for (const childId of result.awaitedChildren) {
      this.r.followUps.track('cancel-child', async () => {
        await this.commitCancel({ project: result.run.project, env: result.run.env }, childId, `parent run ${runId} was cancelled`);
      });
    }
    // A user cancel's call waits for its audit row, after the frame (specification, "Audit").
    if (result.committed) await this.announcer.announce(result.run, 'user-cancel');
    return result.run;
  }
}
