/**
 * The fixed fields of a log line (STYLE.md habit 8), snake_case, the same names in every service:
 * a log pipeline can index them once. A line about a run carries `run_id`, `execution_seq` and
 * `function_id` (use {@link runFields}); `step_id` and `worker_id` when the line is about one.
 * The camelCase spellings are refused at compile time, so a caller cannot log `runId` by mistake.
 * Other fields are free (snake_case by habit: `error`, `job_id`, `count`…).
 */
export interface LogFields {
  run_id?: string;
  execution_seq?: number;
  function_id?: string;
  step_id?: string;
  worker_id?: string;
  runId?: never;
  executionSeq?: never;
  functionId?: never;
  stepId?: never;
  workerId?: never;
  [field: string]: unknown;
}

/** What {@link runFields} reads from a run: the store's `RunRecord` fits. */
export interface LoggedRun {
  id: string;
  executionSeq?: number;
  functionId?: string;
}

/**
 * The fixed fields of a line about `run`: `run_id` always, `execution_seq` and `function_id` when
 * the run carries them, `step_id` / `worker_id` when given.
 */
export function runFields(run: LoggedRun, about: { stepId?: string; workerId?: string } = {}): LogFields {
  return {
    run_id: run.id,
    ...(run.executionSeq !== undefined ? { execution_seq: run.executionSeq } : {}),
    ...(run.functionId !== undefined ? { function_id: run.functionId } : {}),
    ...(about.stepId !== undefined ? { step_id: about.stepId } : {}),
    ...(about.workerId !== undefined ? { worker_id: about.workerId } : {}),
  };
}
