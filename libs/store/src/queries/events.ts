import { EventRecord, mapEvent, toJson } from '../rows';
import { Tx } from '../tx';

/**
 * Appends an event to the log, with its `version` (default 1) and `metadata` (NULL when none). With an idempotency key already used in this project/env, nothing
 * is inserted and the earlier event is returned with `duplicate: true`. So is an event whose `id`
 * is already logged: a gateway that forwarded a sync trigger with that id and heard no answer
 * triggers again with it, and finds the event a dispatcher committed (on PostgreSQL the insert
 * waits for that dispatcher's open transaction). Throws when that id is logged in another
 * project or env.
 */
export async function insertEvent(
  tx: Tx,
  event: { id: string; project: string; env: string; name: string; data: unknown; idempotencyKey?: string; version?: number; metadata?: Record<string, unknown> | null },
): Promise<{ event: EventRecord; duplicate: boolean }> {
  if (event.idempotencyKey) {
    const rows = await tx.query(
      `SELECT * FROM events WHERE project = $1 AND env = $2 AND idempotency_key = $3`,
      [event.project, event.env, event.idempotencyKey],
    );
    if (rows.length) return { event: mapEvent(rows[0]), duplicate: true };
  }
  // Two triggers with one key, or one event id, racing: the loser's insert does nothing (on
  // PostgreSQL it waits for the winner's commit) and it answers with the winner's event.
  const rows = await tx.query(
    `INSERT INTO events (id, project, env, name, data, idempotency_key, ts, version, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT DO NOTHING RETURNING *`,
    [event.id, event.project, event.env, event.name, toJson(event.data ?? {}), event.idempotencyKey ?? null, tx.now, event.version ?? 1, event.metadata ? toJson(event.metadata) : null],
  );
  if (rows.length) return { event: mapEvent(rows[0]), duplicate: false };
  const same = await getEvent(tx, event.id);
  if (same) {
    if (same.project !== event.project || same.env !== event.env) throw new Error(`event ${event.id} is already logged in another project or env`);
    return { event: same, duplicate: true };
  }
  const existing = await tx.query(
    `SELECT * FROM events WHERE project = $1 AND env = $2 AND idempotency_key = $3`,
    [event.project, event.env, event.idempotencyKey],
  );
  return { event: mapEvent(existing[0]), duplicate: true };
}

/**
 * Appends an event whose id is derived from what it stands for (a cron tick): `null` when an event
 * with that id is already logged, so the tick it stands for has already started its run.
 */
export async function insertEventOnce(
  tx: Tx,
  event: { id: string; project: string; env: string; name: string; data: unknown },
): Promise<EventRecord | null> {
  const rows = await tx.query(
    `INSERT INTO events (id, project, env, name, data, idempotency_key, ts) VALUES ($1, $2, $3, $4, $5, NULL, $6)
     ON CONFLICT (id) DO NOTHING RETURNING *`,
    [event.id, event.project, event.env, event.name, toJson(event.data ?? {}), tx.now],
  );
  return rows.length ? mapEvent(rows[0]) : null;
}

export async function getEvent(tx: Tx, id: string): Promise<EventRecord | null> {
  const rows = await tx.query(`SELECT * FROM events WHERE id = $1`, [id]);
  return rows.length ? mapEvent(rows[0]) : null;
}

export interface EventFilter {
  /** Only events of this name. */
  name?: string;
  limit: number;
  /** The last event of the previous page (newest first). */
  cursor?: { ts: number; id: string };
}

/** A page of the event log of `project`/`env`, newest first (by `ts`, then `id`). */
export async function listEvents(tx: Tx, project: string, env: string, filter: EventFilter): Promise<EventRecord[]> {
  const where = ['project = $1', 'env = $2'];
  const params: unknown[] = [project, env];
  if (filter.name) { params.push(filter.name); where.push(`name = $${params.length}`); }
  if (filter.cursor) {
    params.push(filter.cursor.ts, filter.cursor.id);
    where.push(`(ts < $${params.length - 1} OR (ts = $${params.length - 1} AND id < $${params.length}))`);
  }
  params.push(filter.limit);
  const rows = await tx.query(`SELECT * FROM events WHERE ${where.join(' AND ')} ORDER BY ts DESC, id DESC LIMIT $${params.length}`, params);
  return rows.map(mapEvent);
}
