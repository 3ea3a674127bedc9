import { StepResult, StepStatus, StepType } from '@ironflow/contracts';
import { StepRecord, mapStep, toJson } from '../rows';
import { Tx } from '../tx';

export async function listSteps(tx: Tx, runId: string): Promise<StepRecord[]> {
  const rows = await tx.query(`SELECT * FROM steps WHERE run_id = $1 ORDER BY sequence, created_at`, [runId]);
  return rows.map(mapStep);
}

export async function getStep(tx: Tx, runId: string, stepId: string): Promise<StepRecord | null> {
  const rows = await tx.query(`SELECT * FROM steps WHERE run_id = $1 AND step_id = $2`, [runId, stepId]);
  return rows.length ? mapStep(rows[0]) : null;
}

/** Sequence the next new step of a run takes: max over all its step rows + 1, 0 when none (3.7). */
export async function nextStepSequence(tx: Tx, runId: string): Promise<number> {
  const rows = await tx.query<{ m: unknown }>(`SELECT MAX(sequence) AS m FROM steps WHERE run_id = $1`, [runId]);
  const max = rows[0]?.m;
  return max === null || max === undefined ? 0 : Number(max) + 1;
}

/**
 * Saves the steps a worker reported, in order from `sequenceStart`. A step already `completed`
 * is never changed (a repeated report inserts nothing); a failed attempt's row is replaced by
 * the next attempt's result.
 */
export async function saveReportedSteps(tx: Tx, runId: string, steps: StepResult[], sequenceStart: number): Promise<void> {
  let sequence = sequenceStart;
  for (const step of steps) {
    const status: StepStatus = step.status === 'completed' ? 'completed' : 'failed';
    const endedAt = step.ended_at ? Date.parse(step.ended_at) || tx.now : tx.now;
    await tx.execute(
      `INSERT INTO steps (run_id, step_id, name, type, status, output, error, sequence, created_at, ended_at, started_at)
       VALUES ($1, $2, $3, 'run', $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (run_id, step_id) DO UPDATE SET status = excluded.status, output = excluded.output,
         error = excluded.error, ended_at = excluded.ended_at, started_at = excluded.started_at
       WHERE steps.status <> 'completed'`,
      [runId, step.id, step.name, status, toJson(step.output), toJson(step.error), sequence, tx.now, endedAt, startedAtOf(step, endedAt)],
    );
    sequence += 1;
  }
}

/**
 * When a reported step started (ms, the worker's clock like its `ended_at`): its `started_at`, else
 * `ended_at` − `duration_ms`; `null` when it says neither, or a start after its end.
 */
function startedAtOf(step: StepResult, endedAt: number): number | null {
  const parsed = step.started_at ? Date.parse(step.started_at) : NaN;
  const started = Number.isFinite(parsed) ? parsed : typeof step.duration_ms === 'number' && Number.isFinite(step.duration_ms) && step.duration_ms >= 0 ? endedAt - Math.round(step.duration_ms) : null;
  return started !== null && started <= endedAt ? started : null;
}

export interface NewWaitStep {
  runId: string;
  stepId: string;
  name: string;
  type: Exclude<StepType, 'run'>;
  status: StepStatus;
  output?: unknown;
  wakeAt?: number | null;
  timeoutAt?: number | null;
  childRunId?: string | null;
  sequence: number;
}

/** Inserts the row of the wait a segment yielded at; a repeated yield inserts nothing. */
export async function insertWaitStep(tx: Tx, step: NewWaitStep): Promise<boolean> {
  const r = await tx.execute(
    `INSERT INTO steps (run_id, step_id, name, type, status, output, wake_at, timeout_at, child_run_id, sequence, created_at, ended_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (run_id, step_id) DO NOTHING`,
    [step.runId, step.stepId, step.name, step.type, step.status, toJson(step.output), step.wakeAt ?? null,
      step.timeoutAt ?? null, step.childRunId ?? null, step.sequence, tx.now, step.status === 'waiting' ? null : tx.now],
  );
  return r.affected === 1;
}

/**
 * Resolves a waiting invoke step with its child's outcome. Updates only while the step is
 * `waiting`, belongs to `runId` and links `childRunId` (the specification's wake guard).
 */
export async function resolveInvokeStep(
  tx: Tx,
  runId: string,
  stepId: string,
  childRunId: string,
  status: 'completed' | 'failed',
  output: unknown,
  error: unknown,
): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE steps SET status = $4, output = $5, error = $6, ended_at = $7
     WHERE run_id = $1 AND step_id = $2 AND child_run_id = $3 AND type = 'invoke' AND status = 'waiting'`,
    [runId, stepId, childRunId, status, toJson(output), toJson(error), tx.now],
  );
  return r.affected === 1;
}

/** Sleeps whose `wake_at` has passed, oldest first. */
export async function listDueSleeps(tx: Tx, limit: number): Promise<StepRecord[]> {
  const rows = await tx.query(
    `SELECT * FROM steps WHERE status = 'waiting' AND type = 'sleep' AND wake_at <= $1 ORDER BY wake_at LIMIT $2`,
    [tx.now, limit],
  );
  return rows.map(mapStep);
}

/** Invoke or `waitForEvent` steps whose timeout has passed while still waiting, oldest first. */
export async function listDueTimeouts(tx: Tx, type: 'invoke' | 'wait_for_event', limit: number): Promise<StepRecord[]> {
  const rows = await tx.query(
    `SELECT * FROM steps WHERE status = 'waiting' AND type = $1 AND timeout_at <= $2 ORDER BY timeout_at LIMIT $3`,
    [type, tx.now, limit],
  );
  return rows.map(mapStep);
}

/** Ends a waiting step (a sleep that is due, an invoke that timed out); only from `waiting`. */
export async function endWaitingStep(tx: Tx, runId: string, stepId: string, status: 'completed' | 'timed_out'): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE steps SET status = $3, ended_at = $4 WHERE run_id = $1 AND step_id = $2 AND status = 'waiting'`,
    [runId, stepId, status, tx.now],
  );
  return r.affected === 1;
}

/** Completes a waiting `waitForEvent` step with the event that satisfied it; only from `waiting`. */
export async function completeWaitStep(tx: Tx, runId: string, stepId: string, output: unknown): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE steps SET status = 'completed', output = $3, ended_at = $4 WHERE run_id = $1 AND step_id = $2 AND status = 'waiting'`,
    [runId, stepId, toJson(output), tx.now],
  );
  return r.affected === 1;
}


/** A waiting invoke step whose linked child has ended, as the waiting-run pass reads it. */
export interface EndedInvokeWait {
  parentRunId: string;
  stepId: string;
  childRunId: string;
  /** Whether the parent's execution holds a lease (the pass then skips it). */
  parentLeased: boolean;
}

/**
 * One page of the waiting-run pass (specification, "A parent run is woken once"): waiting
 * parents, ordered by id after `afterRunId`, with a waiting invoke step whose child has ended.
 * Also returns the last parent id read, the next page's cursor (`null` at the end).
 */
export async function pageEndedInvokeWaits(tx: Tx, afterRunId: string, pageSize: number): Promise<{ waits: EndedInvokeWait[]; nextCursor: string | null }> {
  const parents = await tx.query<{ id: string }>(
    `SELECT id FROM runs WHERE status = 'waiting' AND id > $1 ORDER BY id LIMIT $2`,
    [afterRunId, pageSize],
  );
  if (parents.length === 0) return { waits: [], nextCursor: null };
  const ids = parents.map((p) => p.id);
  const rows = await tx.query(
    `SELECT s.run_id, s.step_id, s.child_run_id,
            CASE WHEN EXISTS (SELECT 1 FROM leases l WHERE l.run_id = s.run_id) THEN 1 ELSE 0 END AS parent_leased
       FROM steps s JOIN runs c ON c.id = s.child_run_id
      WHERE s.run_id IN (${ids.map((_, i) => `$${i + 1}`).join(', ')})
        AND s.type = 'invoke' AND s.status = 'waiting'
        AND c.status IN ('completed', 'failed', 'cancelled')
      ORDER BY s.run_id`,
    ids,
  );
  return {
    waits: rows.map((r) => ({ parentRunId: String(r.run_id), stepId: String(r.step_id), childRunId: String(r.child_run_id), parentLeased: Number(r.parent_leased) === 1 })),
    nextCursor: parents.length < pageSize ? null : ids[ids.length - 1],
  };
}

/** Children a run waits on through a sync `step.invoke` (its waiting invoke steps). */
export async function listWaitingInvokeChildren(tx: Tx, runId: string): Promise<string[]> {
  const rows = await tx.query<{ child_run_id: string }>(
    `SELECT child_run_id FROM steps WHERE run_id = $1 AND type = 'invoke' AND status = 'waiting' AND child_run_id IS NOT NULL`,
    [runId],
  );
  return rows.map((r) => String(r.child_run_id));
}
