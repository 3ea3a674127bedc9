import { InvocationError, StepResult, WireEvent, YieldInfo } from './steps';

/** R2 body (3.3). */
export interface WorkerRegisterBody {
  worker_id: string;
  hostname?: string;
  function_ids: string[];
  max_concurrent_jobs?: number;
  labels?: Record<string, string>;
  version?: { sdk?: string; runtime?: string };
}

/** R3 body (3.3). */
export interface WorkerHeartbeatBody {
  worker_id: string;
  active_jobs?: number;
  jobs?: { job_id: string; started_at?: string }[];
}

/**
 * A memoized step in a pull assignment (3.4). `output` is always present: `null` when the step
 * has no value (a finished sleep, a step that returned `undefined`), because the SDK's schema
 * declares it `z.unknown()` without `.optional()` and rejects the whole assignment without it.
 */
export interface PullCompletedStep {
  step_id: string;
  name: string;
  output: unknown;
}

/** One job of a R4 answer (3.4). Job id is `{runId}-{execution_seq}`. */
export interface JobAssignment {
  job_id: string;
  run_id: string;
  function_id: string;
  attempt: number;
  event: WireEvent;
  completed_steps: PullCompletedStep[];
  step_sequence_base?: number;
  execution_seq?: number;
  lease_token?: string;
  context?: { trace_id?: string; metadata?: Record<string, string>; secrets?: Record<string, string> };
}

/** R5 body (3.3). */
export interface JobAckBody {
  run_id?: string;
  execution_seq?: number;
  lease_token?: string;
}

/** R6 body (3.3): one of four statuses, with the fence echoed. */
export interface JobUpdateBody {
  status: 'progress' | 'completed' | 'failed' | 'yielded';
  steps?: StepResult[];
  step_offset?: number;
  output?: unknown;
  error?: InvocationError;
  yield?: YieldInfo;
  execution_seq?: number;
  lease_token?: string;
  /** Ours (the Ironflow SDK does not send it): the worker's clock when it sent this update, ISO-8601; places a sleep on the engine's clock. */
  sent_at?: string;
}
