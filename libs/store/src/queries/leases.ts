import { Tx } from '../tx';

/** Inserts the lease of a claimed execution (DESIGN.md "Leases and fencing"): liveness only. */
export async function insertLease(tx: Tx, runId: string, executionSeq: number, holder: string, lane: string, expiresAt: number): Promise<void> {
  await tx.execute(
    `INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (run_id) DO UPDATE SET execution_seq = excluded.execution_seq, holder = excluded.holder,
       lane = excluded.lane, expires_at = excluded.expires_at`,
    [runId, executionSeq, holder, lane, expiresAt],
  );
}

/** Extends the lease of one execution; touches only the lease row, never the run. */
export async function refreshLease(tx: Tx, runId: string, executionSeq: number, expiresAt: number, holder?: string): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE leases SET expires_at = $3, holder = COALESCE($4, holder) WHERE run_id = $1 AND execution_seq = $2`,
    [runId, executionSeq, expiresAt, holder ?? null],
  );
  return r.affected === 1;
}

/** Extends a lease only while `holder` holds it (a worker's heartbeat cannot extend another's lease). */
export async function refreshLeaseHeldBy(tx: Tx, runId: string, executionSeq: number, holder: string, expiresAt: number): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE leases SET expires_at = $4 WHERE run_id = $1 AND execution_seq = $2 AND holder = $3`,
    [runId, executionSeq, holder, expiresAt],
  );
  return r.affected === 1;
}

/** Who holds an execution's lease, or `null` when it has none. */
export async function leaseHolder(tx: Tx, runId: string, executionSeq: number): Promise<string | null> {
  const rows = await tx.query<{ holder: string }>(`SELECT holder FROM leases WHERE run_id = $1 AND execution_seq = $2`, [runId, executionSeq]);
  return rows.length ? String(rows[0].holder) : null;
}

/** Idempotent release of an execution's lease. */
export async function deleteLease(tx: Tx, runId: string, executionSeq: number): Promise<void> {
  await tx.execute(`DELETE FROM leases WHERE run_id = $1 AND execution_seq = $2`, [runId, executionSeq]);
}

export async function countLeases(tx: Tx, runId?: string): Promise<number> {
  const rows = runId
    ? await tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM leases WHERE run_id = $1`, [runId])
    : await tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM leases`);
  return Number(rows[0].n);
}
