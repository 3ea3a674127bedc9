import { Tx } from '../tx';

/** A `cron_schedules` row: the next tick of one function's cron triggers (ms, store clock). */
export interface CronScheduleRow {
  project: string;
  env: string;
  functionId: string;
  spec: string;
  nextAt: number;
}

type Row = Record<string, unknown>;
const mapSchedule = (r: Row): CronScheduleRow => ({
  project: String(r.project),
  env: String(r.env),
  functionId: String(r.function_id),
  spec: String(r.spec),
  nextAt: Number(r.next_at),
});

/**
 * Keeps a function's schedule in step with its registration, in the registration's unit of work:
 * `null` deletes it (no cron trigger left); a new or changed `spec` takes `nextAt`; an unchanged
 * `spec` keeps the schedule's own `next_at`, so re-registering (every worker start does) neither
 * skips nor repeats a tick.
 */
export async function syncSchedule(tx: Tx, project: string, env: string, functionId: string, schedule: { spec: string; nextAt: number } | null): Promise<void> {
  if (!schedule) {
    await tx.execute(`DELETE FROM cron_schedules WHERE project = $1 AND env = $2 AND function_id = $3`, [project, env, functionId]);
    return;
  }
  await tx.execute(
    `INSERT INTO cron_schedules (project, env, function_id, spec, next_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (project, env, function_id) DO UPDATE SET spec = excluded.spec, next_at = excluded.next_at
     WHERE cron_schedules.spec <> excluded.spec`,
    [project, env, functionId, schedule.spec, schedule.nextAt],
  );
}

/** Schedules whose next tick is due at `tx.now`, earliest first (every project and env). */
export async function listDueSchedules(tx: Tx, limit: number): Promise<CronScheduleRow[]> {
  const rows = await tx.query(`SELECT * FROM cron_schedules WHERE next_at <= $1 ORDER BY next_at LIMIT $2`, [tx.now, limit]);
  return rows.map(mapSchedule);
}

/**
 * Locks one schedule if it is still due; `null` when another scheduler holds it (PostgreSQL, SKIP
 * LOCKED) or has already advanced it.
 */
export async function lockDueSchedule(tx: Tx, project: string, env: string, functionId: string): Promise<CronScheduleRow | null> {
  const rows = await tx.query(
    `SELECT * FROM cron_schedules WHERE project = $1 AND env = $2 AND function_id = $3 AND next_at <= $4${tx.forUpdateSkipLocked}`,
    [project, env, functionId, tx.now],
  );
  return rows.length ? mapSchedule(rows[0]) : null;
}

/**
 * Moves a schedule from the tick it was at (`fromNextAt`, the guard) to `toNextAt`, or deletes it
 * when `toNextAt` is null (the schedule has no further tick). Returns whether the row changed.
 */
export async function advanceSchedule(tx: Tx, row: CronScheduleRow, toNextAt: number | null): Promise<boolean> {
  const key = [row.project, row.env, row.functionId, row.nextAt];
  const { affected } = toNextAt === null
    ? await tx.execute(`DELETE FROM cron_schedules WHERE project = $1 AND env = $2 AND function_id = $3 AND next_at = $4`, key)
    : await tx.execute(`UPDATE cron_schedules SET next_at = $5 WHERE project = $1 AND env = $2 AND function_id = $3 AND next_at = $4`, [...key, toNextAt]);
  return affected === 1;
}
