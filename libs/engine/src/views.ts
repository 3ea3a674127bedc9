import { EventView, RunResultView, RunView, StepView, isTerminalRunStatus } from '@ironflow/contracts';
import { EventRecord, RunRecord, StepRecord } from '@ironflow/store';

const iso = (ms: number) => new Date(ms).toISOString();

/** The API's view of a run (WIRE-PROTOCOL.md 5.5); optional fields absent, never null. */
export function toRunView(run: RunRecord): RunView {
  return {
    id: run.id,
    functionId: run.functionId,
    functionVersion: run.functionVersion,
    eventId: run.eventId ?? '',
    executionMode: run.mode,
    status: run.status,
    attempt: run.attempt,
    maxAttempts: run.maxAttempts,
    input: run.input,
    ...(run.output !== null && run.status === 'completed' ? { output: run.output } : {}),
    ...(run.error ? { error: run.error } : {}),
    ...(run.parentRunId ? { parentRunId: run.parentRunId } : {}),
    ...(run.parentStepId ? { parentStepId: run.parentStepId } : {}),
    createdAt: iso(run.createdAt),
    updatedAt: iso(run.updatedAt),
    ...(run.startedAt !== null ? { startedAt: iso(run.startedAt) } : {}),
    ...(run.endedAt !== null ? { endedAt: iso(run.endedAt) } : {}),
    ...(run.pauseRequested && !isTerminalRunStatus(run.status) ? { pauseRequested: true, ...(run.pauseReason ? { pauseReason: run.pauseReason } : {}) } : {}),
  };
}

export function toRunResultView(run: RunRecord): RunResultView {
  return {
    runId: run.id,
    functionId: run.functionId,
    status: run.status,
    ...(run.status === 'completed' && run.output !== null ? { output: run.output } : {}),
    ...(run.status !== 'completed' && run.error ? { error: run.error } : {}),
    durationMs: run.endedAt !== null ? run.endedAt - (run.startedAt ?? run.createdAt) : 0,
  };
}

export function toStepView(step: StepRecord): StepView {
  return {
    id: step.stepId,
    name: step.name,
    type: step.type,
    status: step.status,
    ...(step.output !== undefined ? { output: step.output } : {}),
    ...(step.error !== null ? { error: step.error } : {}),
    ...(step.childRunId ? { childRunId: step.childRunId } : {}),
    ...(step.wakeAt !== null ? { wakeAt: iso(step.wakeAt) } : {}),
    sequence: step.sequence,
    createdAt: iso(step.createdAt),
    startedAt: iso(step.startedAt ?? step.createdAt),
    ...(step.endedAt !== null ? { endedAt: iso(step.endedAt) } : {}),
    ...(step.injected ? { injected: true } : {}),
  };
}

/** The API's view of an event of the log. */
export function toEventView(event: EventRecord): EventView {
  return {
    id: event.id,
    name: event.name,
    data: event.data,
    ...(event.idempotencyKey ? { idempotencyKey: event.idempotencyKey } : {}),
    ts: iso(event.ts),
  };
}
