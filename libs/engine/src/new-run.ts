import { randomUUID } from 'node:crypto';
import { CallScope } from '@ironflow/contracts';
import { FunctionRecord, NewRun, RunRecord, Tx, cancelOnSql, runsSql } from '@ironflow/store';
import { cancelOnSpecRows } from './cancel-on-specs';
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

/**
 * Inserts a new run of `fn` in its creating unit of work with its `cancel_on_specs` rows. The run
 * is held (claims skip it until its admission replays `cancel_on` and releases it) when
 * `hold` is set (an invoked child) or the function declares `cancelOn`: a cancel event that came
 * before the run existed must reach it before any worker does.
 */
export async function insertNewRun(tx: Tx, fn: FunctionRecord, row: NewRun, hold = false): Promise<RunRecord> {
  const run = await runsSql.insertRun(tx, { ...row, held: hold || (fn.definition.cancelOn ?? []).length > 0 });
  await insertCancelOnSpecs(tx, fn, run);
  return run;
}

/** The `cancel_on_specs` rows of `run`, a new run of `fn` inserted held by `tx` (none when `fn` declares no `cancelOn`). */
export async function insertCancelOnSpecs(tx: Tx, fn: FunctionRecord, run: RunRecord): Promise<void> {
  const specs = fn.definition.cancelOn ?? [];
  if (specs.length) await cancelOnSql.insertSpecs(tx, run.project, run.env, cancelOnSpecRows(run.id, specs, run.input));
}
