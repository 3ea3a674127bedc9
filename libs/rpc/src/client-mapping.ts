/**
 * Mapping between the protobuf-es messages of `ironflow.v1` and the transport-free shapes of
 * `@ironflow/contracts` (`ClientApi`). One place, used by the Connect/gRPC service and by the
 * HTTP/1.1 JSON compatibility layer, so both transports agree on every field.
 */
import type { JsonObject, JsonValue, MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import {
  DEFAULT_RETRY,
  EngineError,
  type ExecutionMode as ContractExecutionMode,
  type FunctionDefinition,
  type RegisterFunctionInput,
  type RunError,
  type RunHistoryEntry,
  type RunResultView,
  type RunStatus as ContractRunStatus,
  type RunView,
  type StepStatus as ContractStepStatus,
  type StepType as ContractStepType,
  type StepView,
  type TriggerInput,
} from '@ironflow/contracts';
import type {
  FunctionSchema,
  RegisterFunctionRequest,
  RunHistoryEntrySchema,
  RunResultSchema,
  RunSchema,
  StepSchema,
  TriggerRequest,
  TriggerSyncRequest,
} from '@ironflow/contracts/proto';
import {
  type ErrorSchema,
  ExecutionMode,
  FunctionStatus,
  RunStatus,
  StepStatus,
  StepType,
} from '@ironflow/contracts/proto';

// ---------------------------------------------------------------------------------------------
// Enums (exhaustive: a new contracts status fails to compile until it is mapped here)

const RUN_STATUS_TO_PROTO: Record<ContractRunStatus, RunStatus> = {
  waiting_for_capacity: RunStatus.WAITING_FOR_CAPACITY,
  running: RunStatus.RUNNING,
  waiting: RunStatus.WAITING,
  paused: RunStatus.PAUSED,
  completed: RunStatus.COMPLETED,
  failed: RunStatus.FAILED,
  cancelled: RunStatus.CANCELLED,
};

const RUN_STATUS_FROM_PROTO = new Map<RunStatus, ContractRunStatus>(
  Object.entries(RUN_STATUS_TO_PROTO).map(([k, v]) => [v, k as ContractRunStatus]),
);

/** Contracts run status (`failed`) → proto enum (`RUN_STATUS_FAILED`). */
export function runStatusToProto(status: ContractRunStatus): RunStatus {
  return RUN_STATUS_TO_PROTO[status];
}

/** Proto enum → contracts run status; `undefined` for UNSPECIFIED (= "no filter"). */
export function runStatusFromProto(status: RunStatus): ContractRunStatus | undefined {
  return RUN_STATUS_FROM_PROTO.get(status);
}

function executionModeToProto(mode: ContractExecutionMode): ExecutionMode {
  switch (mode) {
    case 'push':
      return ExecutionMode.PUSH;
    case 'pull':
      return ExecutionMode.PULL;
  }
}

function executionModeFromProto(mode: ExecutionMode): ContractExecutionMode | undefined {
  switch (mode) {
    case ExecutionMode.PUSH:
      return 'push';
    case ExecutionMode.PULL:
      return 'pull';
    default:
      return undefined;
  }
}

/** `run` is `step.run`, which the SDK's schema calls INVOKE; `invoke` is `step.invoke`. */
function stepTypeToProto(type: ContractStepType): StepType {
  switch (type) {
    case 'run':
      return StepType.INVOKE;
    case 'sleep':
      return StepType.SLEEP;
    case 'wait_for_event':
      return StepType.WAIT_FOR_EVENT;
    case 'invoke':
      return StepType.INVOKE_FUNCTION;
  }
}

function stepStatusToProto(status: ContractStepStatus): StepStatus {
  switch (status) {
    case 'completed':
      return StepStatus.COMPLETED;
    case 'failed':
      return StepStatus.FAILED;
    case 'waiting':
      return StepStatus.WAITING;
    case 'timed_out':
      return StepStatus.TIMED_OUT;
  }
}

// ---------------------------------------------------------------------------------------------
// JSON values, Struct, Timestamp

/** A JSON-safe deep copy (drops `undefined`, turns Dates into strings), or undefined. */
export function toJsonValue(value: unknown): JsonValue | undefined {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  return text === undefined ? undefined : (JSON.parse(text) as JsonValue);
}

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A user value as a `google.protobuf.Struct` (which only holds objects, 4.6). `undefined` and
 * `null` → unset. A non-object value (number, string, boolean, array) is wrapped as
 * `{ "value": <v> }` — binary clients see the wrapper; the JSON layer renders the raw value.
 */
export function toStruct(value: unknown): JsonObject | undefined {
  const json = toJsonValue(value);
  if (json === undefined || json === null) return undefined;
  return isJsonObject(json) ? json : { value: json };
}

/** An ISO-8601 string as a Timestamp; `undefined` for a missing or unparsable time. */
export function toTimestamp(iso: string | undefined): Timestamp | undefined {
  if (!iso) return undefined;
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? undefined : timestampFromDate(date);
}

// ---------------------------------------------------------------------------------------------
// Errors

/** A run's error as `ironflow.v1.Error`; keys beyond message/code/stack/retryable go to `details`. */
export function runErrorToProto(error: RunError): MessageInitShape<typeof ErrorSchema> {
  const { message, code, stack, retryable, ...rest } = error;
  const details = toStruct(rest);
  return {
    message: message ?? '',
    code: code ?? '',
    stack: stack ?? '',
    retryable: retryable ?? false,
    ...(details && Object.keys(details).length > 0 ? { details } : {}),
  };
}

/** A step's stored error (any JSON) as `ironflow.v1.Error`. */
function unknownErrorToProto(error: unknown): MessageInitShape<typeof ErrorSchema> | undefined {
  if (error === undefined || error === null) return undefined;
  if (isJsonObject(error) && typeof error.message === 'string') {
    return runErrorToProto(error as unknown as RunError);
  }
  return { message: typeof error === 'string' ? error : JSON.stringify(error) };
}

// ---------------------------------------------------------------------------------------------
// Requests → ClientApi inputs

/**
 * RegisterFunctionRequest (5.3) → `RegisterFunctionInput`. Proto3 zero values mean "not given":
 * empty strings, `timeout_ms` 0 and EXECUTION_MODE_UNSPECIFIED are left out so the engine applies
 * its defaults; a `retry` message with zero fields takes those fields from `DEFAULT_RETRY`.
 * `triggers` and `cancel_on` are always passed (an empty list replaces the previous one).
 * `debounce.max_wait_ms` 0 means no cap. actor_key, secrets, recording, recording_retention,
 * change_reason and debounce are carried when given, so the engine refuses the ones it does not
 * act on by name. `recording` has explicit presence (our `optional`): `true` records the `all`
 * profile, `false` `none`, absent the default.
 */
export function registerFunctionInputFromProto(req: RegisterFunctionRequest): RegisterFunctionInput {
  const input: RegisterFunctionInput = {
    id: req.id,
    triggers: req.triggers.map((t) => ({
      ...(t.event ? { event: t.event } : {}),
      ...(t.expression ? { expression: t.expression } : {}),
      ...(t.cron ? { cron: t.cron } : {}),
    })),
    cancelOn: req.cancelOn.map((c) => ({ event: c.event, ...(c.match ? { match: c.match } : {}), ...(c.if ? { if: c.if } : {}) })),
  };
  if (req.name) input.name = req.name;
  if (req.description) input.description = req.description;
  const mode = executionModeFromProto(req.preferredMode);
  if (mode) input.mode = mode;
  if (req.endpointUrl) input.endpointUrl = req.endpointUrl;
  if (req.retry) {
    input.retry = {
      maxAttempts: req.retry.maxAttempts || DEFAULT_RETRY.maxAttempts,
      initialDelayMs: req.retry.initialDelayMs || DEFAULT_RETRY.initialDelayMs,
      backoffFactor: req.retry.backoffFactor || DEFAULT_RETRY.backoffFactor,
      maxDelayMs: req.retry.maxDelayMs || DEFAULT_RETRY.maxDelayMs,
    };
  }
  // 0 is proto3's "not given"; any other value goes to the engine, which refuses a negative one as REST does.
  if (req.timeoutMs !== 0) input.timeoutMs = req.timeoutMs;
  if (req.concurrency) {
    input.concurrency = {
      limit: req.concurrency.limit,
      ...(req.concurrency.key ? { key: req.concurrency.key } : {}),
    };
  }
  if (req.metadata) input.metadata = req.metadata;
  if (req.actorKey) input.actorKey = req.actorKey;
  if (req.secrets.length > 0) input.secrets = [...req.secrets];
  if (req.recording !== undefined) input.recording = req.recording;
  if (req.recordingRetention) input.recordingRetention = req.recordingRetention;
  if (req.changeReason) input.changeReason = req.changeReason;
  if (req.debounce) {
    input.debounce = {
      periodMs: req.debounce.periodMs,
      ...(req.debounce.key ? { key: req.debounce.key } : {}),
      ...(req.debounce.maxWaitMs > 0 ? { maxWaitMs: req.debounce.maxWaitMs } : {}),
    };
  }
  return input;
}

/**
 * TriggerRequest / TriggerSyncRequest → `TriggerInput`; missing `data` becomes `{}`; `version` 0
 * (proto3's "not given") is left out, any other value goes to the engine, which refuses one below 1.
 */
export function triggerInputFromProto(req: TriggerRequest | TriggerSyncRequest): TriggerInput {
  const input: TriggerInput = { event: req.event, data: req.data ?? {} };
  if (req.idempotencyKey) input.idempotencyKey = req.idempotencyKey;
  if ('version' in req && req.version !== 0) input.version = req.version;
  if (req.metadata) input.metadata = req.metadata;
  return input;
}

/**
 * The `timeout_ms` of a `TriggerSync` or `InvokeFunctionSync` request: 0 (proto3's "not given")
 * is left out, so the engine waits its default (30000 ms); a positive value is the wait in ms.
 * Throws `VALIDATION_ERROR` for a negative one, which would otherwise silently wait the default.
 */
export function syncTimeoutFromProto(timeoutMs: number): { timeoutMs?: number } {
  if (timeoutMs < 0) throw new EngineError('VALIDATION_ERROR', `timeout_ms: a wait in ms, at least 1 (0 or absent for the default 30000); got ${timeoutMs}`);
  return timeoutMs > 0 ? { timeoutMs } : {};
}

// ---------------------------------------------------------------------------------------------
// ClientApi results → messages

/** A registered function as `ironflow.v1.Function` (status ACTIVE; no created/updated times). */
export function functionToProto(
  fn: FunctionDefinition & { version: number },
): MessageInitShape<typeof FunctionSchema> {
  const metadata = toStruct(fn.metadata);
  return {
    id: fn.id,
    name: fn.name,
    description: fn.description ?? '',
    triggers: fn.triggers.map((t) => ({
      event: t.event ?? '',
      expression: t.expression ?? '',
      cron: t.cron ?? '',
    })),
    retry: { ...fn.retry },
    timeoutMs: fn.timeoutMs,
    ...(fn.concurrency ? { concurrency: { limit: fn.concurrency.limit, key: fn.concurrency.key ?? '' } } : {}),
    ...(fn.debounce ? { debounce: { periodMs: fn.debounce.periodMs, key: fn.debounce.key ?? '', maxWaitMs: fn.debounce.maxWaitMs ?? 0 } } : {}),
    preferredMode: executionModeToProto(fn.mode),
    endpointUrl: fn.endpointUrl ?? '',
    status: FunctionStatus.ACTIVE,
    version: fn.version,
    ...(metadata ? { metadata } : {}),
    cancelOn: fn.cancelOn.map((c) => ({ event: c.event, match: c.match ?? '', if: c.if ?? '' })),
    recording: fn.recordingProfile === 'all',
  };
}

/** A run (5.5) as `ironflow.v1.Run`. */
export function runToProto(run: RunView): MessageInitShape<typeof RunSchema> {
  return {
    id: run.id,
    functionId: run.functionId,
    eventId: run.eventId,
    executionMode: executionModeToProto(run.executionMode),
    input: toStruct(run.input),
    output: toStruct(run.output),
    error: run.error ? runErrorToProto(run.error) : undefined,
    status: runStatusToProto(run.status),
    attempt: run.attempt,
    maxAttempts: run.maxAttempts,
    startedAt: toTimestamp(run.startedAt),
    endedAt: toTimestamp(run.endedAt),
    createdAt: toTimestamp(run.createdAt),
    updatedAt: toTimestamp(run.updatedAt),
    functionVersion: run.functionVersion,
    parentRunId: run.parentRunId,
    parentStepId: run.parentStepId,
    pauseRequested: run.pauseRequested === true,
    pauseReason: run.pauseReason ?? '',
  };
}

/** One TriggerSync result as `ironflow.v1.RunResult`. */
export function runResultToProto(result: RunResultView): MessageInitShape<typeof RunResultSchema> {
  return {
    runId: result.runId,
    functionId: result.functionId,
    status: runStatusToProto(result.status),
    output: toStruct(result.output),
    error: result.error ? runErrorToProto(result.error) : undefined,
    durationMs: Math.round(result.durationMs),
  };
}

/** One step as `ironflow.v1.Step` (ours). */
export function stepToProto(step: StepView): MessageInitShape<typeof StepSchema> {
  return {
    id: step.id,
    name: step.name,
    type: stepTypeToProto(step.type),
    status: stepStatusToProto(step.status),
    output: toStruct(step.output),
    error: unknownErrorToProto(step.error),
    childRunId: step.childRunId,
    wakeAt: toTimestamp(step.wakeAt),
    sequence: step.sequence,
    createdAt: toTimestamp(step.createdAt),
    startedAt: toTimestamp(step.startedAt),
    endedAt: toTimestamp(step.endedAt),
    injected: step.injected === true,
  };
}

/** A JSON value as the JSON text of a string field (GetPausedState, InjectStepOutput); `""` for none. */
export function toJsonText(value: unknown): string {
  return value === undefined ? '' : JSON.stringify(value);
}

/** The JSON text of a string field as a value; throws `VALIDATION_ERROR` naming `field` when empty or not JSON. */
export function fromJsonText(field: string, text: string): unknown {
  if (text.trim() === '') throw new EngineError('VALIDATION_ERROR', `${field}: JSON text is required (e.g. "{\\"a\\":1}" or "null")`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new EngineError('VALIDATION_ERROR', `${field}: not JSON text: ${(err as Error).message}`);
  }
}

/** One history row as `ironflow.v1.RunHistoryEntry` (ours). */
export function historyEntryToProto(entry: RunHistoryEntry): MessageInitShape<typeof RunHistoryEntrySchema> {
  return {
    eventType: entry.eventType,
    cause: entry.cause,
    data: toStruct(entry.data),
    ts: toTimestamp(entry.ts),
  };
}
