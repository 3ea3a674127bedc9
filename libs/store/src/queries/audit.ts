import { parseJson, toJson } from '../rows';
import { Tx } from '../tx';

export interface AuditRow {
  runId: string | null;
  functionId: string | null;
  eventType: string;
  cause?: string;
  data?: unknown;
  /** Row time in ms; default the inserting unit of work's store time (capped at it when given). */
  ts?: number;
}

/**
 * Appends one audit row stamped with the unit of work's store time. A second `run.created` row of
 * a run is skipped (a unique index allows one; see the `RunCreatedOnce` migration).
 */
export async function insertAudit(tx: Tx, row: AuditRow): Promise<void> {
  await tx.execute(
    `INSERT INTO audit_events (run_id, function_id, event_type, cause, data, ts) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
    [row.runId, row.functionId, row.eventType, row.cause ?? null, toJson(row.data), tx.now],
  );
}

/**
 * Inserts rows that arrived together in one statement, in their order; a second `run.created` row
 * of a run is skipped, as in {@link insertAudit}. On PostgreSQL the rows go as arrays, so the
 * statement has one shape (and is prepared) whatever their number; SQLite takes a multi-row `VALUES`.
 */
export async function insertAuditRows(tx: Tx, rows: AuditRow[]): Promise<void> {
  if (rows.length === 0) return;
  if (tx.dialect === 'postgres') {
    await tx.execute(
      `INSERT INTO audit_events (run_id, function_id, event_type, cause, data, ts)
       SELECT run_id, function_id, event_type, cause, data, ts
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) WITH ORDINALITY AS r(run_id, function_id, event_type, cause, data, ts, n)
       ORDER BY n ON CONFLICT DO NOTHING`,
      rowArrays(tx, rows),
    );
    return;
  }
  const params: unknown[] = [];
  const values = rows.map((row) => {
    params.push(row.runId, row.functionId, row.eventType, row.cause ?? null, toJson(row.data), Math.min(row.ts ?? tx.now, tx.now));
    const k = params.length - 6;
    return `($${k + 1}, $${k + 2}, $${k + 3}, $${k + 4}, $${k + 5}, $${k + 6})`;
  });
  await tx.execute(`INSERT INTO audit_events (run_id, function_id, event_type, cause, data, ts) VALUES ${values.join(', ')} ON CONFLICT DO NOTHING`, params);
}

/** `rows` as the six column arrays the PostgreSQL inserts take, each row's time capped at the unit's. */
function rowArrays(tx: Tx, rows: AuditRow[]): unknown[][] {
  return [rows.map((r) => r.runId), rows.map((r) => r.functionId), rows.map((r) => r.eventType), rows.map((r) => r.cause ?? null),
    rows.map((r) => toJson(r.data)), rows.map((r) => Math.min(r.ts ?? tx.now, tx.now))];
}

/** Audit write requests as the audit-writer takes them: their rows, and the request's id when its sender may give it up. */
export interface AuditRequest {
  requestId?: string;
  rows: AuditRow[];
}

/**
 * Stores audit write requests together: settles the fate of each that has an id as `written`
 * ({@link settleAuditRequests}) and inserts, in their order, the rows of those it settled and of
 * those without an id ({@link insertAuditRows}). Returns the ids whose fate another transaction
 * settled first (their senders gave them up): their rows are left out. One statement on
 * PostgreSQL (a unit of work run with `oneStatement`), two on SQLite.
 */
export async function writeAuditRequests(tx: Tx, requests: AuditRequest[]): Promise<Set<string>> {
  const ids = [...new Set(requests.flatMap((r) => (r.requestId === undefined ? [] : [r.requestId])))];
  if (tx.dialect !== 'postgres') {
    const settled = new Set(await settleAuditRequests(tx, ids, 'written'));
    await insertAuditRows(tx, requests.filter((r) => r.requestId === undefined || settled.has(r.requestId)).flatMap((r) => r.rows));
    return new Set(ids.filter((id) => !settled.has(id)));
  }
  const rows = requests.flatMap((r) => r.rows);
  const settled = await tx.query<{ request_id: string }>(
    `WITH settled AS (
       INSERT INTO audit_write_fates (request_id, fate, at) SELECT id, 'written', $1::bigint FROM unnest($2::text[]) AS ids(id)
       ON CONFLICT (request_id) DO NOTHING RETURNING request_id),
     inserted AS (
       INSERT INTO audit_events (run_id, function_id, event_type, cause, data, ts)
       SELECT run_id, function_id, event_type, cause, data, ts
       FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[]) WITH ORDINALITY AS r(run_id, function_id, event_type, cause, data, ts, request_id, n)
       WHERE r.request_id IS NULL OR r.request_id IN (SELECT request_id FROM settled)
       ORDER BY n ON CONFLICT DO NOTHING)
     SELECT request_id FROM settled`,
    [tx.now, ids, ...rowArrays(tx, rows), requests.flatMap((r) => r.rows.map(() => r.requestId ?? null))],
  );
  const written = new Set(settled.map((r) => String(r.request_id)));
  return new Set(ids.filter((id) => !written.has(id)));
}

/** Who settled an audit write request first: the audit-writer (it stored the rows) or the sender (it gave up on them). */
export type AuditFate = 'written' | 'given_up';

/**
 * Settles the fate of audit write requests (`audit_write_fates`): inserts `fate` for each id not
 * settled yet and returns the ids it settled; an id another transaction settled first is left as
 * it is. On PostgreSQL an insert of an id another open transaction has inserted waits for that
 * transaction to end, so of a writer and a sender racing on one request exactly one wins.
 */
export async function settleAuditRequests(tx: Tx, requestIds: string[], fate: AuditFate): Promise<string[]> {
  if (requestIds.length === 0) return [];
  if (tx.dialect === 'postgres') {
    // One shape whatever the number of ids (prepared).
    const rows = await tx.query<{ request_id: string }>(
      `INSERT INTO audit_write_fates (request_id, fate, at) SELECT id, $1::text, $2::bigint FROM unnest($3::text[]) AS ids(id)
       ON CONFLICT (request_id) DO NOTHING RETURNING request_id`,
      [fate, tx.now, requestIds],
    );
    return rows.map((r) => String(r.request_id));
  }
  const values = requestIds.map((_, i) => `($${i + 3}, $1, $2)`);
  const rows = await tx.query<{ request_id: string }>(
    `INSERT INTO audit_write_fates (request_id, fate, at) VALUES ${values.join(', ')} ON CONFLICT (request_id) DO NOTHING RETURNING request_id`,
    [fate, tx.now, ...requestIds],
  );
  return rows.map((r) => String(r.request_id));
}

/** Deletes the fates settled before `before` (store clock, ms). */
export async function deleteAuditFatesBefore(tx: Tx, before: number): Promise<void> {
  await tx.execute(`DELETE FROM audit_write_fates WHERE at < $1`, [before]);
}

/**
 * A run's audit rows in the order they happened: by their time, then by insert order. A row that
 * landed late (a stuck table) carries the time of what it records (`run.created`: the run's
 * creation), so it still reads in its place.
 */
export async function listAudit(tx: Tx, runId: string): Promise<{ eventType: string; cause: string | null; data: unknown; ts: number }[]> {
  const rows = await tx.query(`SELECT * FROM audit_events WHERE run_id = $1 ORDER BY ts, id`, [runId]);
  return rows.map((r) => ({
    eventType: String(r.event_type),
    cause: r.cause === null ? null : String(r.cause),
    data: parseJson(r.data),
    ts: Number(r.ts),
  }));
}
