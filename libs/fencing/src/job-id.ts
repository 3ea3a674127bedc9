import { EngineError } from '@ironflow/contracts';

/** The pull job id of an execution: `{runId}-{execution_seq}` (DESIGN.md "The queue is the runs table"). */
export function jobIdOf(runId: string, executionSeq: number): string {
  return `${runId}-${executionSeq}`;
}

/** Splits a job id; throws `JOB_NOT_FOUND` for one that is not of that form. */
export function parseJobId(jobId: string): { runId: string; executionSeq: number } {
  const cut = jobId.lastIndexOf('-');
  const seq = Number(jobId.slice(cut + 1));
  if (cut <= 0 || !Number.isInteger(seq) || seq < 1) throw new EngineError('JOB_NOT_FOUND', `job ${jobId} is not a job id`);
  return { runId: jobId.slice(0, cut), executionSeq: seq };
}
