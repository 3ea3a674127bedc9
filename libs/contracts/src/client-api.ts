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
  /**
   * The API key that authenticated the call, when keys are required; absent on an open server.
   * A keyed call's project and env are the key's, so a worker's `labels.env` naming another env
   * is refused rather than followed.
   */
  apiKeyId?: string;
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
  /** An operator asked for a pause and no resume followed (present only then, on a live run). */
  pauseRequested?: boolean;
  pauseReason?: string;
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
  /** When the step started: a `step.run`'s start on the worker, a wait's `createdAt`. ISO-8601. */
  startedAt: string;
  endedAt?: string;
  /** Present (true) when the output was set by `InjectStepOutput`. */
  injected?: boolean;
}

/**
 * `PauseRun`'s answer (WIRE-PROTOCOL.md 5.2): `paused` when the run parked at once (it was
 * queued or waiting) or already was paused; `pause_requested` when a segment is running, whose
 * report will park the run.
 */
export type PauseStatus = 'paused' | 'pause_requested';

/** One ended step of a paused run, as `GetPausedState` shows it. */
export interface PausedStepView {
  id: string;
  name: string;
  type: StepType;
  status: StepStatus;
  /** Absent when the step returned nothing (or failed). */
  output?: unknown;
  injected: boolean;
  completedAt?: string;
}

/** Where a paused run stands: its ended steps, the wait it parked at (`nextStepHint`, "" when none), the reason. */
export interface PausedStateView {
  steps: PausedStepView[];
  nextStepHint: string;
  pauseReason: string;
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
  /**
   * Functions the event reached whose `debounce` deferred their run: no run id now; the run
   * starts once the debounce period passes without another event of its key. Empty for a
   * repeated (idempotent) event.
   */
  debouncedFunctionIds: string[];
  /**
   * The idempotency key was used before (ours, `TriggerResponse.duplicate`, field 101): nothing was
   * stored or started; `eventId` is the first event's and `runIds` are its runs.
   */
  duplicate: boolean;
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

/** An event of the event log as the API lists it. `ts` is ISO-8601 (the store's clock). */
export interface EventView {
  id: string;
  name: string;
  data: unknown;
  idempotencyKey?: string;
  ts: string;
}

/** Filter and page of `listEvents`: `name` exact; `limit` 1–500 (default 50); `cursor` = a previous `nextCursor`. */
export interface ListEventsInput {
  name?: string;
  limit?: number;
  cursor?: string;
}

/** A page of events, newest first; `nextCursor` is `""` on the last page. */
export interface ListEventsOutput {
  events: EventView[];
  nextCursor: string;
}

/**
 * Options the Ironflow SDK can send at registration (WIRE-PROTOCOL.md 5.3) that the engine does
 * not act on yet. They are carried to the registry so it can refuse them by name
 * (`VALIDATION_ERROR`) instead of storing and ignoring them.
 */
export interface UnsupportedFunctionOptions {
  actorKey?: string;
  recordingRetention?: string;
  changeReason?: string;
}

export interface RegisterFunctionInput extends Partial<Omit<FunctionDefinition, 'id'>>, UnsupportedFunctionOptions {
  id: string;
  /** The SDK's recording switch: `true` records `all`, `false` records `none` (see `RecordingProfile`). */
  recording?: boolean;
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
  /**
   * Pauses a run at its next segment boundary (see {@link PauseStatus}); a paused run holds no
   * lease and no segment of it starts until `resumeRun`. Repeating it changes nothing. Throws
   * `RUN_NOT_FOUND`, `RUN_NOT_RUNNING` (the run has ended), `VALIDATION_ERROR` (no id).
   */
  pauseRun(scope: CallScope, id: string, reason?: string): Promise<{ status: PauseStatus; run: RunView }>;
  /**
   * Resumes a paused run (back to its open wait, or to the queue) or drops a pause request not
   * yet acted on; a live run that is not paused is answered as it stands. `fromStep` is refused
   * (`VALIDATION_ERROR`): this engine does not replay from a step. Throws `RUN_NOT_FOUND`,
   * `RUN_NOT_RUNNING` (the run has ended).
   */
  resumeRun(scope: CallScope, id: string, fromStep?: string): Promise<RunView>;
  /** The paused run's ended steps and where it parked. Throws `RUN_NOT_FOUND`, `RUN_NOT_PAUSED`. */
  getPausedState(scope: CallScope, id: string): Promise<PausedStateView>;
  /**
   * Sets a step's output while the run is paused (an ended step, or a step id of this run not
   * reached yet, which the worker then memoizes instead of running); the step is marked
   * injected. Answers the step id and its previous output (`undefined` when it had none).
   * Throws `RUN_NOT_FOUND`, `RUN_NOT_PAUSED`, `VALIDATION_ERROR` (a waiting step, a step id of
   * another run), `PAYLOAD_TOO_LARGE`.
   */
  injectStepOutput(scope: CallScope, input: { runId: string; stepId: string; output: unknown; reason?: string }): Promise<{ stepId: string; previousOutput?: unknown }>;
}
