import { RunError } from './errors';
import { FunctionDefinition } from './functions';
import { RunStatus, StepStatus, StepType } from './statuses';

/**
 * The client API (WIRE-PROTOCOL.md section 5) as the engine implements it, independent of the
 * transport. Connect/gRPC handlers and REST controllers translate to and from these shapes.
 * Every method throws `EngineError` for bad input (VALIDATION_ERROR, FUNCTION_NOT_FOUND,
 * RUN_NOT_FOUND, PAYLOAD_TOO_LARGE); none changes committed state when it throws.
 */
export interface CallScope {
  project: string;
  env: string;
}

/** A run as the API returns it (5.5). Times are ISO-8601 strings. */
export interface RunView {
  id: string;
  functionId: string;
  functionVersion: number;
  eventId: string;
  executionMode: 'push' | 'pull';
  status: RunStatus;
  attempt: number;
  maxAttempts: number;
  input: unknown;
  output?: unknown;
  error?: RunError;
  parentRunId?: string;
  parentStepId?: string;
  createdAt: string;
  updatedAt: string;
  startedAt?: string;
  endedAt?: string;
}

export interface StepView {
  id: string;
  name: string;
  type: StepType;
  status: StepStatus;
  output?: unknown;
  error?: unknown;
  childRunId?: string;
  wakeAt?: string;
  sequence: number;
  createdAt: string;
  endedAt?: string;
}

/** One audit row as `GetRunSteps`/`ironflow run get` shows it (the run's history). */
export interface RunHistoryEntry {
  eventType: string;
  cause?: string;
  data?: unknown;
  ts: string;
}

export interface TriggerInput {
  event: string;
  data: unknown;
  idempotencyKey?: string;
  version?: number;
  metadata?: Record<string, unknown>;
}

export interface TriggerOutput {
  eventId: string;
  runIds: string[];
}

/** One entry of TriggerSync's `results[]`: status lowercase, duration in ms. */
export interface RunResultView {
  runId: string;
  functionId: string;
  status: RunStatus;
  output?: unknown;
  error?: RunError;
  durationMs: number;
}

export interface ListRunsInput {
  functionId?: string;
  status?: RunStatus;
  limit?: number;
  cursor?: string;
}

export interface ListRunsOutput {
  runs: RunView[];
  nextCursor: string;
  totalCount: number;
}

/**
 * Options the Ironflow SDK can send at registration (WIRE-PROTOCOL.md 5.3) that the engine does
 * not act on yet. They are carried to the registry so it can refuse them by name
 * (`VALIDATION_ERROR`) instead of storing and ignoring them.
 */
export interface UnsupportedFunctionOptions {
  actorKey?: string;
  secrets?: string[];
  recording?: boolean;
  recordingRetention?: string;
  changeReason?: string;
}

export interface RegisterFunctionInput extends Partial<Omit<FunctionDefinition, 'id'>>, UnsupportedFunctionOptions {
  id: string;
}

export interface ClientApi {
  registerFunction(scope: CallScope, input: RegisterFunctionInput): Promise<{ function: FunctionDefinition & { version: number }; created: boolean }>;
  listFunctions(scope: CallScope): Promise<(FunctionDefinition & { version: number })[]>;
  trigger(scope: CallScope, input: TriggerInput): Promise<TriggerOutput>;
  /** Waits up to `timeoutMs` (default 30000) for every started run to reach an outcome. */
  triggerSync(scope: CallScope, input: TriggerInput & { timeoutMs?: number }): Promise<{ eventId: string; results: RunResultView[] }>;
  getRun(scope: CallScope, id: string): Promise<RunView>;
  listRuns(scope: CallScope, input: ListRunsInput): Promise<ListRunsOutput>;
  getRunSteps(scope: CallScope, id: string): Promise<{ steps: StepView[]; history: RunHistoryEntry[]; children: RunView[] }>;
  /**
   * Starts one run of `functionId` with `input` as its event data (no event is logged, no trigger
   * matched) and waits up to `timeoutMs` (default 30000) for its outcome. Throws
   * `FUNCTION_NOT_FOUND`, `VALIDATION_ERROR`, `PAYLOAD_TOO_LARGE`.
   */
  invokeFunctionSync(scope: CallScope, input: { functionId: string; input: unknown; timeoutMs?: number }): Promise<RunResultView>;
  /** Cancels a non-terminal run; answers with the run as it stands (the outcome that won). */
  cancelRun(scope: CallScope, id: string, reason: string): Promise<RunView>;
}
