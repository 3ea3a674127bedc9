import { parseJson, toJson } from '../rows';
import { Tx } from '../tx';

export interface AuditRow {
  runId: string | null;
  functionId: string | null;
  eventType: string;
  cause?: string;
  data?: unknown;
}

/** Appends one audit row stamped with the unit of work's store time. */
export async function insertAudit(tx: Tx, row: AuditRow): Promise<void> {
  await tx.execute(
    `INSERT INTO audit_events (run_id, function_id, event_type, cause, data, ts) VALUES ($1, $2, $3, $4, $5, $6)`,
    [row.runId, row.functionId, row.eventType, row.cause ?? null, toJson(row.data), tx.now],
  );
}

export async function listAudit(tx: Tx, runId: string): Promise<{ eventType: string; cause: string | null; data: unknown; ts: number }[]> {
  const rows = await tx.query(`SELECT * FROM audit_events WHERE run_id = $1 ORDER BY id`, [runId]);
  return rows.map((r) => ({
    eventType: String(r.event_type),
    cause: r.cause === null ? null : String(r.cause),
    data: parseJson(r.data),
    ts: Number(r.ts),
  }));
}
