import { Tx } from '../tx';

/** A `debounces` row: the pending event of one debounced function and key (times in ms, store clock). */
export interface DebounceRow {
  project: string;
  env: string;
  functionId: string;
  key: string;
  eventId: string;
  dueAt: number;
  deadlineAt: number | null;
  createdAt: number;
}

type Row = Record<string, unknown>;
const mapDebounce = (r: Row): DebounceRow => ({
  project: String(r.project),
  env: String(r.env),
  functionId: String(r.function_id),
  key: String(r.debounce_key),
  eventId: String(r.event_id),
  dueAt: Number(r.due_at),
  deadlineAt: r.deadline_at === null || r.deadline_at === undefined ? null : Number(r.deadline_at),
  createdAt: Number(r.created_at),
});

/**
 * Records `eventId` as the pending event of its function and key, in the trigger's unit of work.
 * The first event of a window opens it: due at `tx.now + periodMs`, capped at `tx.now + maxWaitMs`
 * when given. A later event replaces the pending one and moves the window's end to its own
 * `tx.now + periodMs`, never past the cap the first event set.
 */
export async function pushEvent(
  tx: Tx,
  pending: { project: string; env: string; functionId: string; key: string; eventId: string; periodMs: number; maxWaitMs?: number },
): Promise<void> {
  const dueAt = tx.now + pending.periodMs;
  const deadlineAt = pending.maxWaitMs !== undefined ? tx.now + pending.maxWaitMs : null;
  await tx.execute(
    `INSERT INTO debounces (project, env, function_id, debounce_key, event_id, due_at, deadline_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (project, env, function_id, debounce_key) DO UPDATE SET
       event_id = excluded.event_id,
       due_at = CASE WHEN debounces.deadline_at IS NOT NULL AND debounces.deadline_at < excluded.due_at
                     THEN debounces.deadline_at ELSE excluded.due_at END`,
    [pending.project, pending.env, pending.functionId, pending.key, pending.eventId, deadlineAt !== null ? Math.min(dueAt, deadlineAt) : dueAt, deadlineAt, tx.now],
  );
}

/** Windows that closed by `tx.now`, earliest first (every project and env). */
export async function listDue(tx: Tx, limit: number): Promise<DebounceRow[]> {
  const rows = await tx.query(`SELECT * FROM debounces WHERE due_at <= $1 ORDER BY due_at LIMIT $2`, [tx.now, limit]);
  return rows.map(mapDebounce);
}

/**
 * Takes a closed window: deletes the row only while it is still due (an event that arrived since
 * moved it on) and returns it, with the event it ended on; `null` when another scheduler took it
 * or it is no longer due.
 */
export async function takeDue(tx: Tx, project: string, env: string, functionId: string, key: string): Promise<DebounceRow | null> {
  const rows = await tx.query(
    `DELETE FROM debounces WHERE project = $1 AND env = $2 AND function_id = $3 AND debounce_key = $4 AND due_at <= $5 RETURNING *`,
    [project, env, functionId, key, tx.now],
  );
  return rows.length ? mapDebounce(rows[0]) : null;
}
