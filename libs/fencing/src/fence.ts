import { EngineError, isTerminalRunStatus } from '@ironflow/contracts';
import { RunRecord } from '@ironflow/store';

/** The fencing token of one execution (DESIGN.md "Leases and fencing"). */
export interface ExecutionFence {
  executionSeq: number;
  leaseToken: string;
}

export type ReportKind = 'progress' | 'completed' | 'failed' | 'yielded';

/** What to do with a worker's report: apply it, answer success without effect, or reject it. */
export type FenceVerdict = { kind: 'apply' } | { kind: 'duplicate' } | { kind: 'reject'; error: EngineError };

const OUTCOME_OF: Record<ReportKind, string | null> = {
  progress: null,
  completed: 'completed',
  failed: 'failed',
  yielded: null,
};

export function fenceMatches(run: RunRecord, fence: ExecutionFence | undefined): fence is ExecutionFence {
  return !!fence && !!run.leaseToken && run.executionSeq === fence.executionSeq && run.leaseToken === fence.leaseToken;
}

/**
 * Judges a report against the stored run, in the order DESIGN.md "The outcome transaction" gives:
 * 1. the run is terminal with this execution's own outcome → success with no effect (a retry);
 * 2. the run is terminal otherwise → `RUN_NOT_RUNNING`;
 * 3. the fence does not match the live execution → `STALE_EXECUTION`;
 * 4. the execution already moved the run on (a retried yield or retry-failure) → no effect;
 * 5. otherwise the report applies.
 */
export function judgeReport(run: RunRecord, fence: ExecutionFence | undefined, kind: ReportKind): FenceVerdict {
  const ownExecution = fenceMatches(run, fence);
  if (isTerminalRunStatus(run.status)) {
    if (ownExecution && OUTCOME_OF[kind] === run.status) return { kind: 'duplicate' };
    return reject('RUN_NOT_RUNNING', `run ${run.id} is ${run.status}`, run);
  }
  if (!ownExecution) {
    return reject(
      'STALE_EXECUTION',
      fence === undefined
        ? `report for run ${run.id} carries no fencing token`
        : !run.leaseToken
          ? `run ${run.id} has no live execution (it is ${run.status}); execution ${(fence as ExecutionFence).executionSeq} was recovered or superseded`
          : (fence as ExecutionFence).executionSeq !== run.executionSeq
            ? `execution ${(fence as ExecutionFence).executionSeq} of run ${run.id} is stale: the live execution is ${run.executionSeq}`
            : `the lease token does not match execution ${run.executionSeq} of run ${run.id}`,
      run,
    );
  }
  if (run.status !== 'running') {
    if (kind === 'progress') return reject('RUN_NOT_RUNNING', `run ${run.id} is ${run.status}`, run);
    return { kind: 'duplicate' };
  }
  return { kind: 'apply' };
}

function reject(code: 'STALE_EXECUTION' | 'RUN_NOT_RUNNING', message: string, run: RunRecord): FenceVerdict {
  return { kind: 'reject', error: new EngineError(code, message, { runId: run.id, status: run.status, executionSeq: run.executionSeq }) };
}
