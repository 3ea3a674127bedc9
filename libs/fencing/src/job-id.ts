import { EngineError } from '@ironflow/contracts';

/** The pull job id of an execution: `{runId}-{execution_seq}` (DESIGN.md "The queue is the runs table"). */
export function jobIdOf(runId: string, executionSeq: number): string {
  return `${runId}-${executionSeq}`;
}

/**
 * Splits a job id; throws `JOB_NOT_FOUND` for one that is not of that form, `VALIDATION_ERROR` for
 * one holding U+0000 (no store lookup can take it).
 */
export function parseJobId(jobId: string): { runId: string; executionSeq: number } {
  if (typeof jobId !== 'string') throw new EngineError('JOB_NOT_FOUND', `job ${String(jobId)} is not a job id`);
  if (jobId.includes('\u0000')) throw new EngineError('VALIDATION_ERROR', 'job id: U+0000 (NUL) is not allowed');
  const cut = jobId.lastIndexOf('-');
  const seq = Number(jobId.slice(cut + 1));
  if (cut <= 0 || !Number.isInteger(seq) || seq < 1) throw new EngineError('JOB_NOT_FOUND', `job ${jobId} is not a job id`);
  return { runId: jobId.slice(0, cut), executionSeq: seq };
}
