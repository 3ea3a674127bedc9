import { randomUUID } from 'node:crypto';
import { CallScope } from '@ironflow/contracts';
import { FunctionRecord, NewRun } from '@ironflow/store';
import { laneFields } from './concurrency';

/**
 * The row of a new run of `fn`: a fresh id, the function's version, mode, attempts and lane, and
 * `input` as its data. `eventId` is the triggering event (null for a direct invoke or a child);
 * `parent` links a child to its parent's invoke step.
 */
export function newRunOf(
  scope: CallScope,
  fn: FunctionRecord,
  eventId: string | null,
  input: unknown,
  parent?: { runId: string; stepId: string },
): NewRun {
  const data = input ?? {};
  return {
    id: randomUUID(),
    project: scope.project,
    env: scope.env,
    functionId: fn.definition.id,
    functionVersion: fn.version,
    mode: fn.definition.mode,
    eventId,
    maxAttempts: fn.definition.retry.maxAttempts,
    input: data,
    ...(parent ? { parentRunId: parent.runId, parentStepId: parent.stepId } : {}),
    ...laneFields(fn.definition, data),
  };
}
