import { RunRecord, StepRecord, mapRun, mapStep, toJson } from '../rows';
import { Tx } from '../tx';

/**
 * Pause, resume and step injection (a run parks at its next segment boundary). Every write is
 * guarded in its WHERE by the state the caller read, so a racing claim, report or wake that
 * moved the run first makes it change nothing (`null`).
 */

/**
 * Pauses `run` as read: a `waiting` or `waiting_for_capacity` run parks at once (`paused`,
 * `resume_status` = where it was); a `running` one only records the request (no version bump,
 * so the live execution's report is not fenced out), and its report parks it. Returns the row
 * as written, or `null` when the run moved meanwhile.
 */
export async function requestPause(tx: Tx, run: RunRecord, reason: string | null): Promise<RunRecord | null> {
  let rows: Record<string, unknown>[] = [];
  const params = [run.id, reason, tx.now, run.version];
  if (run.status === 'waiting') {
    rows = await tx.query(
      `UPDATE runs SET status = 'paused', resume_status = 'waiting', pause_requested = 1, pause_reason = $2, version = version + 1, updated_at = $3
       WHERE id = $1 AND status = 'waiting' AND version = $4 RETURNING *`,
      params,
    );
  } else if (run.status === 'waiting_for_capacity') {
    rows = await tx.query(
      `UPDATE runs SET status = 'paused', resume_status = 'waiting_for_capacity', pause_requested = 1, pause_reason = $2, version = version + 1, updated_at = $3
       WHERE id = $1 AND status = 'waiting_for_capacity' AND version = $4 RETURNING *`,
      params,
    );
  } else if (run.status === 'running') {
    rows = await tx.query(
      `UPDATE runs SET pause_requested = 1, pause_reason = $2, updated_at = $3 WHERE id = $1 AND status = 'running' AND version = $4 RETURNING *`,
      params,
    );
  }
  return rows.length ? mapRun(rows[0]) : null;
}

/**
 * Resumes `run` as read: a `paused` run goes back to `resume_status` (to the queue no earlier
 * than now, a retry's backoff kept); a `running` one with a pause requested only drops the
 * request. Clears the pause fields. Returns the row as written, or `null` when the run moved.
 */
export async function resume(tx: Tx, run: RunRecord): Promise<RunRecord | null> {
  let rows: Record<string, unknown>[] = [];
  const params = [run.id, tx.now, run.version];
  if (run.status === 'paused' && run.resumeStatus === 'waiting') {
    rows = await tx.query(
      `UPDATE runs SET status = 'waiting', resume_status = NULL, pause_requested = 0, pause_reason = NULL, version = version + 1, updated_at = $2
       WHERE id = $1 AND status = 'paused' AND resume_status = 'waiting' AND version = $3 RETURNING *`,
      params,
    );
  } else if (run.status === 'paused') {
    rows = await tx.query(
      `UPDATE runs SET status = 'waiting_for_capacity', resume_status = NULL, pause_requested = 0, pause_reason = NULL,
         available_at = CASE WHEN available_at < $2 THEN $2 ELSE available_at END, version = version + 1, updated_at = $2
       WHERE id = $1 AND status = 'paused' AND version = $3 RETURNING *`,
      params,
    );
  } else if (run.status === 'running' && run.pauseRequested) {
    rows = await tx.query(
      `UPDATE runs SET pause_requested = 0, pause_reason = NULL, updated_at = $2 WHERE id = $1 AND status = 'running' AND version = $3 RETURNING *`,
      params,
    );
  }
  return rows.length ? mapRun(rows[0]) : null;
}

/**
 * Sets a step's output while its run is `paused`: an ended step (completed, failed, timed out)
 * becomes `completed` with `output`, its error cleared; a step id the run does not have yet is
 * inserted completed (type `run`, sequence `sequence`), so the worker memoizes it instead of
 * running it. Marked `injected`. A `waiting` step is never changed. Returns the row as written,
 * or `null` when the run is not paused or the step is waiting.
 */
export async function injectStepOutput(
  tx: Tx,
  step: { runId: string; stepId: string; name: string; output: unknown; sequence: number },
): Promise<StepRecord | null> {
  const paused = `EXISTS (SELECT 1 FROM runs WHERE id = $1 AND status = 'paused')`;
  let rows = await tx.query(
    `UPDATE steps SET status = 'completed', output = $3, error = NULL, injected = 1, ended_at = COALESCE(ended_at, $4)
     WHERE run_id = $1 AND step_id = $2 AND status <> 'waiting' AND ${paused} RETURNING *`,
    [step.runId, step.stepId, toJson(step.output ?? null), tx.now],
  );
  if (rows.length === 0) {
    rows = await tx.query(
      `INSERT INTO steps (run_id, step_id, name, type, status, output, injected, sequence, created_at, ended_at)
       SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS TEXT), 'run', 'completed', CAST($4 AS TEXT), 1, CAST($5 AS INTEGER), CAST($6 AS BIGINT), CAST($6 AS BIGINT)
       WHERE ${paused}
       ON CONFLICT (run_id, step_id) DO NOTHING RETURNING *`,
      [step.runId, step.stepId, step.name, toJson(step.output ?? null), step.sequence, tx.now],
    );
  }
  return rows.length ? mapStep(rows[0]) : null;
}
