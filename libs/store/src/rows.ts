import { ExecutionMode, FunctionDefinition, RunError, RunStatus, StepStatus, StepType } from '@ironflow/contracts';

/** A `runs` row as the engine sees it. Times in ms on the store clock. */
export interface RunRecord {
  id: string;
  project: string;
  env: string;
  functionId: string;
  functionVersion: number;
  mode: ExecutionMode;
  eventId: string | null;
  status: RunStatus;
  version: number;
  attempt: number;
  maxAttempts: number;
  executionSeq: number;
  leaseToken: string | null;
  availableAt: number;
  recoveries: number;
  parentRunId: string | null;
  parentStepId: string | null;
  wakePending: boolean;
  /** Created but not yet admitted to the queue (its `cancel_on` replay and dispatch are pending); claims skip it. */
  held: boolean;
  concurrencyKey: string | null;
  /** The function's lane limit when the run was created; `null` when unlimited. */
  concurrencyLimit: number | null;
  input: unknown;
  output: unknown;
  error: RunError | null;
  createdAt: number;
  updatedAt: number;
  startedAt: number | null;
  endedAt: number | null;
  /** An operator asked for a pause; set from the request until the resume. */
  pauseRequested: boolean;
  pauseReason: string | null;
  /** Where a resume sends a `paused` run: `waiting` (its wait is open) or `waiting_for_capacity`; null unless paused. */
  resumeStatus: 'waiting' | 'waiting_for_capacity' | null;
}

export interface StepRecord {
  runId: string;
  stepId: string;
  name: string;
  type: StepType;
  status: StepStatus;
  /** `undefined` when the step returned nothing; JSON `null` is kept as `null`. */
  output: unknown;
  error: unknown;
  wakeAt: number | null;
  childRunId: string | null;
  timeoutAt: number | null;
  sequence: number;
  createdAt: number;
  /** When a `step.run` started on the worker (ms); `null` for waits, which started at `createdAt`. */
  startedAt: number | null;
  endedAt: number | null;
  /** The output was set by `InjectStepOutput`, not by the worker. */
  injected: boolean;
}

export interface FunctionRecord {
  project: string;
  env: string;
  version: number;
  definition: FunctionDefinition;
  createdAt: number;
  updatedAt: number;
}

export interface EventRecord {
  id: string;
  project: string;
  env: string;
  name: string;
  data: unknown;
  idempotencyKey: string | null;
  /** The event's version, ≥ 1 (1 unless the emitter gave one). */
  version: number;
  /** The emitter's metadata (a JSON object), `null` when none was given. */
  metadata: Record<string, unknown> | null;
  ts: number;
}

export interface WorkerRecord {
  id: string;
  project: string;
  env: string;
  functionIds: string[];
  maxConcurrentJobs: number;
  hostname: string | null;
  labels: Record<string, string>;
  registeredAt: number;
  lastSeenAt: number;
}

type Row = Record<string, unknown>;

const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/** JSON text column → value; absent stays `null`. */
export function parseJson(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  return JSON.parse(String(v));
}

/** JSON text column → value, keeping SQL NULL (absent) apart from JSON `null`: NULL → `undefined`. */
export function parseOptionalJson(v: unknown): unknown {
  return v === null || v === undefined ? undefined : JSON.parse(String(v));
}

/** Value → JSON text column; `undefined` is stored as NULL. */
export function toJson(v: unknown): string | null {
  return v === undefined ? null : JSON.stringify(v);
}

export function mapRun(r: Row): RunRecord {
  return {
    id: String(r.id),
    project: String(r.project),
    env: String(r.env),
    functionId: String(r.function_id),
    functionVersion: num(r.function_version),
    mode: r.mode as ExecutionMode,
    eventId: strOrNull(r.event_id),
    status: r.status as RunStatus,
    version: num(r.version),
    attempt: num(r.attempt),
    maxAttempts: num(r.max_attempts),
    executionSeq: num(r.execution_seq),
    leaseToken: strOrNull(r.lease_token),
    availableAt: num(r.available_at),
    recoveries: num(r.recoveries),
    parentRunId: strOrNull(r.parent_run_id),
    parentStepId: strOrNull(r.parent_step_id),
    wakePending: num(r.wake_pending) === 1,
    held: num(r.held) === 1,
    concurrencyKey: strOrNull(r.concurrency_key),
    concurrencyLimit: numOrNull(r.concurrency_limit),
    input: parseJson(r.input),
    output: parseJson(r.output),
    error: parseJson(r.error) as RunError | null,
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
    startedAt: numOrNull(r.started_at),
    endedAt: numOrNull(r.ended_at),
    pauseRequested: num(r.pause_requested) === 1,
    pauseReason: strOrNull(r.pause_reason),
    resumeStatus: strOrNull(r.resume_status) as RunRecord['resumeStatus'],
  };
}

export function mapStep(r: Row): StepRecord {
  return {
    runId: String(r.run_id),
    stepId: String(r.step_id),
    name: String(r.name),
    type: r.type as StepType,
    status: r.status as StepStatus,
    output: parseOptionalJson(r.output),
    error: parseJson(r.error),
    wakeAt: numOrNull(r.wake_at),
    childRunId: strOrNull(r.child_run_id),
    timeoutAt: numOrNull(r.timeout_at),
    sequence: num(r.sequence),
    createdAt: num(r.created_at),
    startedAt: numOrNull(r.started_at),
    endedAt: numOrNull(r.ended_at),
    injected: num(r.injected) === 1,
  };
}

export function mapFunction(r: Row): FunctionRecord {
  return {
    project: String(r.project),
    env: String(r.env),
    version: num(r.version),
    definition: parseJson(r.definition) as FunctionDefinition,
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
  };
}

export function mapEvent(r: Row): EventRecord {
  return {
    id: String(r.id),
    project: String(r.project),
    env: String(r.env),
    name: String(r.name),
    data: parseJson(r.data),
    idempotencyKey: strOrNull(r.idempotency_key),
    version: r.version === null || r.version === undefined ? 1 : num(r.version),
    metadata: parseJson(r.metadata) as Record<string, unknown> | null,
    ts: num(r.ts),
  };
}

export function mapWorker(r: Row): WorkerRecord {
  return {
    id: String(r.id),
    project: String(r.project),
    env: String(r.env),
    functionIds: parseJson(r.function_ids) as string[],
    maxConcurrentJobs: num(r.max_concurrent_jobs),
    hostname: strOrNull(r.hostname),
    labels: parseJson(r.labels) as Record<string, string>,
    registeredAt: num(r.registered_at),
    lastSeenAt: num(r.last_seen_at),
  };
}
