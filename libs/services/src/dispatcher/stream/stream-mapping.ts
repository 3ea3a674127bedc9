/**
 * `ironflow.v1.WorkerService` messages ↔ the engine's transport-neutral stream shapes
 * (WIRE-PROTOCOL.md 4.2–4.6). Pure functions, no I/O.
 *
 * Struct-typed fields (`Event.data`, `CompletedStep.output`, `JobCompleted.output`,
 * `ExecutedStep.output`) hold only JSON objects (4.6, decision 7.7). Going to the worker, a
 * non-object value is sent wrapped as `{"value": v}` and a `null`/absent one as no field, so the
 * v0.29 worker reads the wrapper; every such field also has an `*_json` twin (field ≥ 100, ours)
 * carrying the exact JSON text, which the Ironflow TS SDK reads instead. Coming from the worker,
 * an `*_json` field wins when set; otherwise the Struct is taken as it is (an object).
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { InvocationError, JobAssignment, StepResult, WorkerRegisterBody, YieldInfo } from '@ironflow/contracts';
import { parseSentAt, type SegmentReport, type StreamActiveJob, type StreamEngineMessage, type StreamFence, type StreamLeaseState } from '@ironflow/engine';
import { toStruct, toTimestamp, v1 } from '@ironflow/rpc';

export type EngineMessageInit = MessageInitShape<typeof v1.EngineMessageSchema>;

/** `register` → the REST registration body the engine validates (4.4 WorkerRegister). `max_concurrent_jobs` 0 = unset (default 10). */
export function fromRegister(reg: v1.WorkerRegister): WorkerRegisterBody {
  return {
    worker_id: reg.workerId,
    hostname: reg.hostname,
    function_ids: [...reg.functionIds],
    ...(reg.maxConcurrentJobs > 0 ? { max_concurrent_jobs: reg.maxConcurrentJobs } : {}),
    labels: { ...reg.labels },
    ...(reg.version ? { version: { sdk: reg.version.sdk, runtime: reg.version.runtime } } : {}),
  };
}

/** Heartbeat `jobs` (4.4 ActiveJob): `execution_seq` 0 and `lease_token` "" mean absent (v0.29 sends only `job_id`). */
export function fromHeartbeat(hb: v1.WorkerHeartbeat): StreamActiveJob[] {
  return hb.jobs.map((j) => ({
    jobId: j.jobId,
    ...(j.executionSeq > 0n ? { executionSeq: Number(j.executionSeq) } : {}),
    ...(j.leaseToken ? { leaseToken: j.leaseToken } : {}),
  }));
}

/** The fence a terminal echoes. */
export function fenceOf(msg: { executionSeq: bigint; leaseToken: string }): StreamFence {
  return { ...(msg.executionSeq > 0n ? { executionSeq: Number(msg.executionSeq) } : {}), ...(msg.leaseToken ? { leaseToken: msg.leaseToken } : {}) };
}

/** `job_completed` → a `completed` report; `output_json` (101) wins over `output`; `steps` (100) are ours. */
export function fromJobCompleted(msg: v1.JobCompleted): SegmentReport {
  const output = msg.outputJson !== '' ? parseJsonText(msg.outputJson, msg.output) : msg.output;
  return { kind: 'completed', output, steps: msg.steps.map(fromExecutedStep) };
}

/** `job_failed` → a `failed` report with the error's message, code, retryable flag and stack. */
export function fromJobFailed(msg: v1.JobFailed): SegmentReport {
  const error: InvocationError = { message: msg.error?.message || 'job failed without an error message', retryable: msg.error?.retryable === true };
  if (msg.error?.code) error.code = msg.error.code;
  if (msg.error?.stack) error.stack = msg.error.stack;
  const stepId = msg.error?.details?.step_id;
  if (typeof stepId === 'string') error.step_id = stepId;
  return { kind: 'failed', error, steps: msg.steps.map(fromExecutedStep) };
}

/**
 * `job_yielded` (ours, field 100) → a `yielded` report. `yield_json` is the yield object of
 * WIRE-PROTOCOL.md 1.5, plus `sent_at` (the worker's clock when it sent it, ISO-8601), which
 * becomes the report's `sentAt`; text that is not a JSON object becomes an empty yield, which the
 * engine rejects (`VALIDATION_ERROR`, the attempt then fails retryably).
 */
export function fromJobYielded(msg: v1.JobYielded): SegmentReport {
  const parsed = parseJsonText(msg.yieldJson, undefined);
  const { sent_at: sentAtText, ...y } = (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {}) as YieldInfo & { sent_at?: unknown };
  const sentAt = parseSentAt(sentAtText);
  return { kind: 'yielded', yield: y as YieldInfo, steps: msg.steps.map(fromExecutedStep), ...(sentAt !== undefined ? { sentAt } : {}) };
}

/** ExecutedStep (4.4, + ours `output_json` 100) → StepResult (1.4). */
export function fromExecutedStep(step: v1.ExecutedStep): StepResult {
  const result: StepResult = {
    id: step.id,
    name: step.name,
    type: step.type === 'compensate' ? 'compensate' : 'invoke',
    status: step.status === 'failed' ? 'failed' : 'completed',
    duration_ms: step.durationMs,
  };
  const output = step.outputJson !== '' ? parseJsonText(step.outputJson, step.output) : step.output;
  if (output !== undefined) result.output = output;
  if (step.error) {
    result.error = { message: step.error.message, retryable: step.error.retryable };
    if (step.error.code) result.error.code = step.error.code;
    if (step.error.stack) result.error.stack = step.error.stack;
  }
  if (step.compensationFor) result.compensation_for = step.compensationFor;
  return result;
}

const LEASE_STATES: Record<StreamLeaseState, v1.LeaseState> = {
  refreshed: v1.LeaseState.REFRESHED,
  stale: v1.LeaseState.STALE,
  unknown: v1.LeaseState.UNKNOWN,
};

/** An engine message → `EngineMessage` (4.3). */
export function toEngineMessage(msg: StreamEngineMessage): EngineMessageInit {
  switch (msg.kind) {
    case 'registered':
      return { payload: { case: 'registered', value: { workerId: msg.workerId, heartbeatIntervalMs: msg.heartbeatIntervalMs } } };
    case 'job':
      return { payload: { case: 'job', value: toJobAssignment(msg.job, msg.leaseExpiresAt) } };
    case 'lease_refresh':
      return {
        payload: {
          case: 'leaseRefresh',
          value: { segments: msg.segments.map((s) => ({ runId: s.runId, executionSeq: BigInt(s.executionSeq), state: LEASE_STATES[s.state] })) },
        },
      };
    case 'cancel':
      return { payload: { case: 'cancel', value: { jobId: msg.jobId, reason: msg.reason } } };
    case 'shutdown':
      return { payload: { case: 'shutdown', value: { reason: msg.reason, drainTimeoutMs: msg.drainTimeoutMs } } };
  }
}

/**
 * A pull assignment (3.4) → JobAssignment (4.4): Struct fields wrapped, `*_json` twins exact. A
 * completed step without a value (a sleep) has no `output` Struct and `output_json` `"null"`, as
 * the REST assignment has `"output": null`; the event carries `metadata` (7) and `version` (8).
 */
export function toJobAssignment(job: JobAssignment, leaseExpiresAt: number): MessageInitShape<typeof v1.JobAssignmentSchema> {
  const data = toStruct(job.event.data);
  const metadata = toStruct(job.event.metadata);
  return {
    jobId: job.job_id,
    runId: job.run_id,
    functionId: job.function_id,
    event: {
      id: job.event.id,
      name: job.event.name,
      ...(data ? { data } : {}),
      ...(job.event.timestamp ? { timestamp: toTimestamp(job.event.timestamp) } : {}),
      ...(metadata ? { metadata } : {}),
      version: job.event.version ?? 1,
    },
    completedSteps: job.completed_steps.map((s) => {
      const output = toStruct(s.output);
      return { stepId: s.step_id, name: s.name, ...(output ? { output } : {}), outputJson: jsonText(s.output) };
    }),
    attempt: job.attempt,
    ...(job.context ? { context: { traceId: job.context.trace_id ?? '', metadata: job.context.metadata ?? {}, secrets: job.context.secrets ?? {} } } : {}),
    executionSeq: BigInt(job.execution_seq ?? 0),
    leaseToken: job.lease_token ?? '',
    leaseExpiresAt: timestampFromMs(leaseExpiresAt),
    eventDataJson: jsonText(job.event.data),
  };
}

/** JSON text of a value; "" for `undefined`. */
function jsonText(value: unknown): string {
  return value === undefined ? '' : (JSON.stringify(value) ?? '');
}

function parseJsonText(text: string, fallback: unknown): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}
