import { FunctionDefinition, JobAssignment, PullCompletedStep, PushCompletedStep, PushRequest, WireEvent } from '@ironflow/contracts';
import { jobIdOf } from '@ironflow/fencing';
import { ClaimedRun, EventRecord, RunRecord, StepRecord, Tx, eventsSql, functionsSql, stepsSql } from '@ironflow/store';

/** Everything a worker needs to execute one claimed segment. */
export interface Segment {
  run: RunRecord;
  definition: FunctionDefinition | null;
  event: WireEvent;
  steps: StepRecord[];
  nextSequence: number;
  /** Values of the secrets the function declares, by name (set by the claim; absent when it declares none). */
  secrets?: Record<string, string>;
}

/** The event an invoked child receives: the invoke's input as `data`. */
export const INVOKED_EVENT_NAME = 'ironflow/function.invoked';

/**
 * A stored event as workers receive it (WIRE-PROTOCOL.md 2.2, 3.4): `data` always present (`null`
 * when none), its `version`, and `metadata` only when the emitter gave some (absent, never null).
 * Also the output of a `waitForEvent` step the event satisfied.
 */
export function toWireEvent(stored: EventRecord): WireEvent {
  return {
    id: stored.id,
    name: stored.name,
    data: stored.data ?? null,
    timestamp: new Date(stored.ts).toISOString(),
    version: stored.version,
    ...(stored.metadata ? { metadata: stored.metadata } : {}),
  };
}

/** A run's segment: from the rows its claim read (`segmentRows`, PostgreSQL), else read in `tx`. */
export async function loadSegment(tx: Tx, claimed: ClaimedRun): Promise<Segment> {
  const { segmentRows, ...run } = claimed;
  const fn = segmentRows ? segmentRows.fn : await functionsSql.getFunction(tx, run.project, run.env, run.functionId);
  const stored = segmentRows ? segmentRows.event : run.eventId ? await eventsSql.getEvent(tx, run.eventId) : null;
  const event = runEventOf(run, stored);
  const steps = segmentRows ? segmentRows.steps : await stepsSql.listSteps(tx, run.id);
  const nextSequence = steps.reduce((max, s) => Math.max(max, s.sequence + 1), 0);
  return { run, definition: fn?.definition ?? null, event, steps, nextSequence };
}

/** The event a run's handler receives: its stored event, or, for an invoked child or direct invoke, its input as `ironflow/function.invoked`. */
export function runEventOf(run: RunRecord, stored: EventRecord | null): WireEvent {
  return stored
    ? toWireEvent(stored)
    : { id: run.id, name: INVOKED_EVENT_NAME, data: run.input ?? {}, timestamp: new Date(run.createdAt).toISOString(), version: 1 };
}

/**
 * The push request of a segment (WIRE-PROTOCOL.md 2.2): completed steps with their output; invoke
 * steps that failed (error as a JSON string) or timed out. Optional fields absent, never null.
 */
export function toPushRequest(segment: Segment): PushRequest {
  const steps: PushCompletedStep[] = [];
  for (const s of segment.steps) {
    if (s.status === 'completed') steps.push({ id: s.stepId, name: s.name, status: 'completed', ...(s.output !== undefined ? { output: s.output } : {}) });
    else if (s.type === 'invoke' && s.status === 'failed') steps.push({ id: s.stepId, name: s.name, status: 'failed', error: typeof s.error === 'string' ? s.error : JSON.stringify(s.error) });
    else if (s.type === 'invoke' && s.status === 'timed_out') steps.push({ id: s.stepId, name: s.name, status: 'timed_out' });
  }
  return { run_id: segment.run.id, function_id: segment.run.functionId, attempt: segment.run.attempt, event: segment.event, steps, ...(segment.secrets ? { secrets: segment.secrets } : {}) };
}

/**
 * The pull assignment of a segment (WIRE-PROTOCOL.md 3.4): completed steps only, fenced. Every
 * completed step carries `output`, `null` when it has none (a sleep, a step that returned
 * `undefined`): the SDK's schema requires the key and drops the whole assignment without it.
 */
export function toJobAssignment(segment: Segment): JobAssignment {
  const completed: PullCompletedStep[] = segment.steps
    .filter((s) => s.status === 'completed')
    .map((s) => ({ step_id: s.stepId, name: s.name, output: s.output === undefined ? null : s.output }));
  return {
    job_id: jobIdOf(segment.run.id, segment.run.executionSeq),
    run_id: segment.run.id,
    function_id: segment.run.functionId,
    attempt: segment.run.attempt,
    event: segment.event,
    completed_steps: completed,
    step_sequence_base: segment.nextSequence,
    execution_seq: segment.run.executionSeq,
    lease_token: segment.run.leaseToken ?? '',
    ...(segment.secrets ? { context: { secrets: segment.secrets } } : {}),
  };
}
