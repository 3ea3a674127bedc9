import { Tx } from '../tx';

export interface OpenCorrelation {
  runId: string;
  stepId: string;
  matchPath: string | null;
  /** JSON text of the triggering event's value at `matchPath`. */
  matchValue: string | null;
}

/** Records the event a `waitForEvent` step waits for (DESIGN.md `waiting_correlations`). */
export async function insertCorrelation(
  tx: Tx,
  c: { runId: string; stepId: string; project: string; env: string; eventName: string; matchPath: string | null; matchValue: string | null },
): Promise<void> {
  await tx.execute(
    `INSERT INTO waiting_correlations (run_id, step_id, project, env, event_name, match_path, match_value, satisfied)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 0) ON CONFLICT (run_id, step_id) DO NOTHING`,
    [c.runId, c.stepId, c.project, c.env, c.eventName, c.matchPath, c.matchValue],
  );
}

/** Open correlations of an event name, read without locks (the waiting step's guarded write delivers once). */
export async function listOpenCorrelations(tx: Tx, project: string, env: string, eventName: string): Promise<OpenCorrelation[]> {
  const rows = await tx.query(
    `SELECT run_id, step_id, match_path, match_value FROM waiting_correlations
     WHERE project = $1 AND env = $2 AND event_name = $3 AND satisfied = 0`,
    [project, env, eventName],
  );
  return rows.map((r) => ({
    runId: String(r.run_id),
    stepId: String(r.step_id),
    matchPath: r.match_path === null ? null : String(r.match_path),
    matchValue: r.match_value === null ? null : String(r.match_value),
  }));
}

/** Closes a correlation; only once. */
export async function closeCorrelation(tx: Tx, runId: string, stepId: string): Promise<boolean> {
  const r = await tx.execute(`UPDATE waiting_correlations SET satisfied = 1 WHERE run_id = $1 AND step_id = $2 AND satisfied = 0`, [runId, stepId]);
  return r.affected === 1;
}

/** Closes every open correlation of a run that stopped waiting (timed out, cancelled). */
export async function closeCorrelationsOfRun(tx: Tx, runId: string): Promise<void> {
  await tx.execute(`UPDATE waiting_correlations SET satisfied = 1 WHERE run_id = $1 AND satisfied = 0`, [runId]);
}
