import { EngineError, isTerminalRunStatus } from '@ironflow/contracts';
import { RunRecord } from '@ironflow/store';

/** The fencing token of one execution (DESIGN.md "Leases and fencing"). */
export interface ExecutionFence {
  executionSeq: number;
  leaseToken: string;
}

/**
 * The `executionSeq` of a fence whose request named another execution than its job id's (its
 * `execution_seq`): it matches no execution, and its refusal says so instead of naming this number.
 */
export const MISMATCHED_EXECUTION_SEQ = -1;

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
    return reject('STALE_EXECUTION', staleMessage(run, fence), run);
  }
  if (run.status !== 'running') {
    if (kind === 'progress') return reject('RUN_NOT_RUNNING', `run ${run.id} is ${run.status}`, run);
    return { kind: 'duplicate' };
  }
  return { kind: 'apply' };
}

/** Why `fence` is not the live execution of `run`, for a `STALE_EXECUTION` refusal. */
function staleMessage(run: RunRecord, fence: ExecutionFence | undefined): string {
  if (fence === undefined) return `report for run ${run.id} carries no fencing token`;
  if (fence.executionSeq === MISMATCHED_EXECUTION_SEQ) return `the report's execution_seq is not its job id's execution, so it matches no execution of run ${run.id}`;
  if (!run.leaseToken) return `run ${run.id} has no live execution (it is ${run.status}); execution ${fence.executionSeq} was recovered or superseded`;
  if (fence.executionSeq !== run.executionSeq) return `execution ${fence.executionSeq} of run ${run.id} is stale: the live execution is ${run.executionSeq}`;
  return `the lease token does not match execution ${run.executionSeq} of run ${run.id}`;
}

function reject(code: 'STALE_EXECUTION' | 'RUN_NOT_RUNNING', message: string, run: RunRecord): FenceVerdict {
  return { kind: 'reject', error: new EngineError(code, message, { runId: run.id, status: run.status, executionSeq: run.executionSeq }) };
}
