/**
 * The stream worker's wire mapping (WIRE-PROTOCOL.md 4.2–4.6): SDK shapes ↔ the SDK's own copy of
 * the generated `ironflow.v1` messages (`./gen`, from `proto/` by `npx buf generate`), plus the
 * binary (de)serializers `@grpc/grpc-js` needs.
 *
 * Struct fields hold only JSON objects, so values go as JSON text in the `*_json` fields Ironflow
 * added (≥ 100). Outgoing values (step outputs, a job's result) go only there, never also in their
 * Struct: the engine reads the `*_json` field, and a second copy would halve the room a report has
 * under the engine's message limit (4 MiB). Incoming `*_json` fields win over their Struct.
 */
import { create, fromBinary, toBinary, type JsonObject, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { InvocationError, StepResult, WireEvent, YieldInfo } from '@ironflow/contracts';
import type { MemoizedStep } from './step-tools';
import {
  type EngineMessage,
  EngineMessageSchema,
  type ExecutedStepSchema,
  type JobAssignment,
  type WorkerMessage,
  WorkerMessageSchema,
  WorkerService,
} from '@ironflow/contracts/proto';

/** gRPC path of the stream: `/ironflow.v1.WorkerService/Connect`. */
export const CONNECT_METHOD_PATH = `/${WorkerService.typeName}/${WorkerService.method.connect.name}`;

export type WorkerMessageInit = MessageInitShape<typeof WorkerMessageSchema>;

export const serializeWorkerMessage = (message: WorkerMessage): Buffer => Buffer.from(toBinary(WorkerMessageSchema, message));
export const deserializeEngineMessage = (bytes: Buffer): EngineMessage => fromBinary(EngineMessageSchema, bytes);

/** Builds a `WorkerMessage` from its init shape. */
export function workerMessage(init: WorkerMessageInit): WorkerMessage {
  return create(WorkerMessageSchema, init);
}

/** JSON text of a value; "" for `undefined` (no value). */
export function jsonText(value: unknown): string {
  return value === undefined ? '' : (JSON.stringify(value) ?? '');
}

/** The exact value of a `*_json` field when set, else the Struct (possibly `undefined`). */
export function exactValue(json: string, struct: JsonObject | undefined): unknown {
  if (json !== '') {
    try {
      return JSON.parse(json);
    } catch {
      // fall back to the Struct
    }
  }
  return struct;
}

/**
 * The triggering event of an assignment (4.6): `data` from `event_data_json` (ours), else the
 * Struct, else `{}`; `timestamp` missing → now; `version` (8) 0 → 1; `metadata` (7) when set.
 */
export function eventOf(job: JobAssignment, now: () => number = Date.now): WireEvent {
  const e = job.event;
  const data = exactValue(job.eventDataJson, e?.data);
  return {
    id: e?.id ?? '',
    name: e?.name ?? '',
    data: data === undefined ? {} : data,
    timestamp: (e?.timestamp ? timestampDate(e.timestamp) : new Date(now())).toISOString(),
    version: e?.version && e.version > 0 ? e.version : 1,
    ...(e?.metadata ? { metadata: e.metadata } : {}),
  };
}

/** `completed_steps` → memoized steps (all completed, 3.4); `output_json` (ours) wins. */
export function memoOf(job: JobAssignment): MemoizedStep[] {
  return job.completedSteps.map((s) => {
    const output = exactValue(s.outputJson, s.output);
    return { id: s.stepId, name: s.name, status: 'completed' as const, ...(output !== undefined ? { output } : {}) };
  });
}

/** A StepResult (1.4) as an ExecutedStep (4.4), its output as `output_json` only (its Struct `output` unset). */
export function toExecutedStep(step: StepResult): MessageInitShape<typeof ExecutedStepSchema> {
  return {
    id: step.id,
    name: step.name,
    type: step.type,
    status: step.status,
    outputJson: jsonText(step.output),
    ...(step.error
      ? { error: { message: step.error.message, retryable: step.error.retryable === true, code: step.error.code ?? '', stack: step.error.stack ?? '' } }
      : {}),
    compensationFor: step.compensation_for ?? '',
    durationMs: Math.max(0, Math.round(step.duration_ms ?? 0)),
  };
}

/** An invocation error as `ironflow.v1.Error`; `step_id` travels in `details`. */
export function toWireError(error: InvocationError) {
  return {
    message: error.message,
    code: error.code ?? '',
    retryable: error.retryable === true,
    stack: error.stack ?? '',
    ...(error.step_id ? { details: { step_id: error.step_id } } : {}),
  };
}

/** The yield object (1.5), with our `sent_at` (the worker's clock when it sends it), as `JobYielded.yield_json`. */
export function yieldJson(y: YieldInfo & { sent_at?: string }): string {
  return JSON.stringify(y);
}

export { timestampFromDate };
