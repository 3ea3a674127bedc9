import { Tx } from '../tx';

/** Where a pass got to in the event log: the last event it read (store clock ms, id). */
export interface PassCursor {
  ts: number;
  id: string;
}

/** The stored cursor of pass `name`, or `null` before its first write. */
export async function getCursor(tx: Tx, name: string): Promise<PassCursor | null> {
  const rows = await tx.query<{ ts: unknown; id: string }>(`SELECT ts, id FROM pass_cursors WHERE name = $1`, [name]);
  return rows.length === 0 ? null : { ts: Number(rows[0].ts), id: String(rows[0].id) };
}

/**
 * Stores `cursor` for pass `name` unless the stored one is already at or past it (two schedulers
 * may run the same pass: the cursor only moves forward).
 */
export async function advanceCursor(tx: Tx, name: string, cursor: PassCursor): Promise<void> {
  await tx.execute(
    `INSERT INTO pass_cursors (name, ts, id) VALUES ($1, $2, $3)
     ON CONFLICT (name) DO UPDATE SET ts = excluded.ts, id = excluded.id
     WHERE pass_cursors.ts < excluded.ts OR (pass_cursors.ts = excluded.ts AND pass_cursors.id < excluded.id)`,
    [name, cursor.ts, cursor.id],
  );
}
