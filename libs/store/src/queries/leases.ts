import { Tx } from '../tx';

/**
 * How a lease insert treats a lease its run already has (an earlier execution's): the new one
 * replaces it. Shared by every statement that inserts a lease.
 */
export const LEASE_REPLACED = `ON CONFLICT (run_id) DO UPDATE SET execution_seq = excluded.execution_seq, holder = excluded.holder,
       lane = excluded.lane, expires_at = excluded.expires_at, deadline_at = excluded.deadline_at`;

/**
 * Inserts the lease of a claimed execution (DESIGN.md "Leases and fencing"): liveness
 * (`expires_at`, extended by heartbeats) and the execution's deadline (`deadline_at`, claim time +
 * the function's timeout, never extended; `null` for none).
 */
export async function insertLease(tx: Tx, runId: string, executionSeq: number, holder: string, lane: string, expiresAt: number, deadlineAt: number | null = null): Promise<void> {
  await tx.execute(
    `INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at, deadline_at) VALUES ($1, $2, $3, $4, $5, $6)
     ${LEASE_REPLACED}`,
    [runId, executionSeq, holder, lane, expiresAt, deadlineAt],
  );
}

/** The lease of a claimed execution, as {@link insertLease} takes it. */
export interface NewLease {
  runId: string;
  executionSeq: number;
  holder: string;
  lane: string;
  expiresAt: number;
  deadlineAt: number | null;
}

/**
 * Inserts the leases of the executions one claim took, as {@link insertLease} inserts one: on
 * PostgreSQL in one statement of fixed shape (arrays, so it is prepared whatever their number),
 * on SQLite one statement each.
 */
export async function insertLeases(tx: Tx, leases: NewLease[]): Promise<void> {
  if (leases.length === 0) return;
  if (tx.dialect !== 'postgres') {
    for (const l of leases) await insertLease(tx, l.runId, l.executionSeq, l.holder, l.lane, l.expiresAt, l.deadlineAt);
    return;
  }
  await tx.execute(
    `INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at, deadline_at)
     SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
     ${LEASE_REPLACED}`,
    [leases.map((l) => l.runId), leases.map((l) => l.executionSeq), leases.map((l) => l.holder), leases.map((l) => l.lane),
      leases.map((l) => l.expiresAt), leases.map((l) => l.deadlineAt)],
  );
}

/** An execution whose deadline has passed while it still holds its lease. */
export interface OverdueExecution {
  runId: string;
  executionSeq: number;
  holder: string;
  deadlineAt: number;
}

/** Leases whose `deadline_at` has passed, oldest deadline first (partial index `leases_deadline`). */
export async function listOverdueExecutions(tx: Tx, limit: number): Promise<OverdueExecution[]> {
  const rows = await tx.query(
    `SELECT run_id, execution_seq, holder, deadline_at FROM leases WHERE deadline_at IS NOT NULL AND deadline_at <= $1 ORDER BY deadline_at LIMIT $2`,
    [tx.now, limit],
  );
  return rows.map((r) => ({ runId: String(r.run_id), executionSeq: Number(r.execution_seq), holder: String(r.holder), deadlineAt: Number(r.deadline_at) }));
}

/**
 * Extends the lease of one execution; touches only the lease row, never the run. A lease that
 * has already expired is not revived (false): the execution counts as lost, lease recovery
 * queues it again.
 */
export async function refreshLease(tx: Tx, runId: string, executionSeq: number, expiresAt: number, holder?: string): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE leases SET expires_at = $3, holder = COALESCE($4, holder) WHERE run_id = $1 AND execution_seq = $2 AND expires_at > $5`,
    [runId, executionSeq, expiresAt, holder ?? null, tx.now],
  );
  return r.affected === 1;
}

/**
 * Extends the leases of several executions to `expiresAt`, as `refreshLease` does each (an
 * expired lease is not revived). PostgreSQL: one statement that skips a lease row another
 * transaction holds (an outcome's commit deleting it, most likely), so it never waits on a row
 * and cannot deadlock with a group commit; a skipped lease keeps its expiry until the next
 * refresh. SQLite: one update per execution. Returns how many leases it extended.
 */
export async function refreshLeases(tx: Tx, executions: { runId: string; executionSeq: number }[], expiresAt: number): Promise<number> {
  if (executions.length === 0) return 0;
  if (tx.dialect !== 'postgres') {
    let extended = 0;
    for (const e of executions) if (await refreshLease(tx, e.runId, e.executionSeq, expiresAt)) extended += 1;
    return extended;
  }
  const r = await tx.execute(
    `UPDATE leases SET expires_at = $3 WHERE run_id IN (
       SELECT l.run_id FROM leases l JOIN unnest($1::text[], $2::int[]) AS e(run_id, execution_seq)
           ON l.run_id = e.run_id AND l.execution_seq = e.execution_seq
        WHERE l.expires_at > $4
        FOR UPDATE OF l SKIP LOCKED)`,
    [executions.map((e) => e.runId), executions.map((e) => e.executionSeq), expiresAt, tx.now],
  );
  return r.affected;
}

/**
 * Records that the worker of an execution had a clock at least `offsetMs` ahead of the store clock
 * (negative: behind); keeps the largest such bound. Touches only the lease row.
 */
export async function noteWorkerClock(tx: Tx, runId: string, executionSeq: number, offsetMs: number): Promise<void> {
  await tx.execute(
    `UPDATE leases SET clock_offset_ms = CASE WHEN clock_offset_ms IS NULL OR clock_offset_ms < $3 THEN $3 ELSE clock_offset_ms END
     WHERE run_id = $1 AND execution_seq = $2`,
    [runId, executionSeq, Math.round(offsetMs)],
  );
}

/** The bound {@link noteWorkerClock} recorded for an execution, or `null`. */
export async function workerClockOffset(tx: Tx, runId: string, executionSeq: number): Promise<number | null> {
  const rows = await tx.query<{ clock_offset_ms: unknown }>(`SELECT clock_offset_ms FROM leases WHERE run_id = $1 AND execution_seq = $2`, [runId, executionSeq]);
  const value = rows[0]?.clock_offset_ms;
  return value === null || value === undefined ? null : Number(value);
}

/**
 * Extends a lease only while `holder` holds it (a worker's heartbeat cannot extend another's
 * lease) and it has not expired (an expired lease is not revived).
 */
export async function refreshLeaseHeldBy(tx: Tx, runId: string, executionSeq: number, holder: string, expiresAt: number): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE leases SET expires_at = $4 WHERE run_id = $1 AND execution_seq = $2 AND holder = $3 AND expires_at > $5`,
    [runId, executionSeq, holder, expiresAt, tx.now],
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
