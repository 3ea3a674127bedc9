import { RunError, isTerminalRunStatus } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { RunRecord, runsSql, stepsSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';

/**
 * The parent wake (specification, "A parent run is woken once"). It copies a child's committed
 * outcome onto the parent's invoke step only while that step is `waiting`, belongs to the child's
 * parent and links this child, and queues the parent only from `waiting`. Over pull, where the
 * worker cannot receive a failed step, a failed or cancelled child fails the parent with
 * `INVOKE_FAILED` naming the child. A second wake changes nothing. The child's `wake_pending`
 * flag is cleared in the same unit of work, so the waiting-run pass reads only lost wakes.
 */
export class WakeSystem {
  constructor(
    private readonly r: EngineResources,
    private readonly announcer: OutcomeAnnouncer,
    private readonly hints: DispatchHints,
  ) {}

  async wakeParent(child: RunRecord, path: 'commit' | 'pass' = 'commit'): Promise<void> {
    if (!child.parentRunId || !child.parentStepId || !isTerminalRunStatus(child.status)) return;
    const parentRunId = child.parentRunId;
    const parentStepId = child.parentStepId;
    const effect = await this.r.store.unitOfWork('wakeParent', async (tx) => {
      const parent = await runsSql.getRun(tx, parentRunId, { lock: true });
      await this.r.pausePoints.reached('wake.afterRead', parentRunId);
      if (!parent || isTerminalRunStatus(parent.status)) {
        await runsSql.clearWakePending(tx, child.id);
        return { failedParent: null as RunRecord | null, queued: null as RunRecord | null };
      }
      const failed = child.status !== 'completed';
      const resolved = await stepsSql.resolveInvokeStep(
        tx,
        parent.id,
        parentStepId,
        child.id,
        failed ? 'failed' : 'completed',
        failed ? null : child.output,
        failed ? invokeStepError(child) : null,
      );
      let failedParent: RunRecord | null = null;
      let queued: RunRecord | null = null;
      if (resolved && failed && parent.mode === 'pull') {
        failedParent = await commitOutcome(tx, parent.id, { status: 'failed', error: invokeFailure(child) }, {
          kind: 'version',
          status: 'waiting',
          version: parent.version,
        });
      } else if (resolved && (await runsSql.queueContinuation(tx, parent.id))) {
        queued = parent;
      }
      await runsSql.clearWakePending(tx, child.id);
      return { failedParent, queued };
    });
    if (effect.failedParent) this.announcer.announce(effect.failedParent);
    if (effect.queued) this.hints.queued(effect.queued.project, effect.queued.env, effect.queued.mode);
    if (effect.failedParent || effect.queued) this.r.metrics.parentWakes.inc({ path });
  }

  /**
   * Recovers lost wakes: reads ended children whose wake never applied (`wake_pending`, a partial
   * index, so the cost follows the lost wakes, not the waiting runs), a page at a time, and runs
   * the same wake for each. A failing wake is logged and the pass moves on. Returns wakes tried.
   */
  async waitingRunPass(): Promise<number> {
    const children = await this.r.store.read('listWakePending', (tx) => runsSql.listWakePending(tx, this.r.config.passPageSize));
    for (const child of children) {
      try {
        await this.wakeParent(child, 'pass');
      } catch (err) {
        this.r.logger.warn('waiting-run pass could not wake a parent', { childRunId: child.id, error: String(err) });
      }
    }
    return children.length;
  }
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
