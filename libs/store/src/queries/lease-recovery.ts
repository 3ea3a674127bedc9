import { mapRun, RunRecord } from '../rows';
import { Tx } from '../tx';

export interface ExpiredLease {
  runId: string;
  executionSeq: number;
  holder: string;
  expiresAt: number;
}

/** Leases whose `expires_at` has passed, oldest first. */
export async function listExpiredLeases(tx: Tx, limit: number): Promise<ExpiredLease[]> {
  const rows = await tx.query(`SELECT * FROM leases WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2`, [tx.now, limit]);
  return rows.map((r) => ({ runId: String(r.run_id), executionSeq: Number(r.execution_seq), holder: String(r.holder), expiresAt: Number(r.expires_at) }));
}

/**
 * Expires at once every live lease of a push execution (`expires_at` set to the store's now, ms):
 * the leases an engine node holds (a dispatcher's claim, a claim at trigger or at a wait's end),
 * never a worker's (pull and stream runs: their worker may outlive the engine and go on
 * heartbeating). One statement; returns how many leases it expired. For a store one process holds
 * alone (`OpenedStore.exclusive`), at its start: every such lease was left by a process that is
 * gone, and the capacity scanner's next scan recovers it as any expired lease.
 */
export async function expirePushLeases(tx: Tx): Promise<number> {
  // Per lease row, its run by primary key: the cost follows the leases, not the runs.
  const r = await tx.execute(
    `UPDATE leases SET expires_at = $1 WHERE expires_at > $1 AND EXISTS (SELECT 1 FROM runs WHERE runs.id = leases.run_id AND runs.mode = 'push')`,
    [tx.now],
  );
  return r.affected;
}

/**
 * Queues again the execution whose lease expired (DESIGN.md `capacity-scanner`): status
 * `waiting_for_capacity` with the same attempt, `recoveries + 1`, the lease token cleared so a
 * late report of the lost execution is stale, and the lease row deleted. A run with a pause
 * requested parks instead (`paused`, resumed to the queue). Only while that execution is still
 * the live one. Returns the row as written, or `null`.
 */
export function requeueRecovered(tx: Tx, run: RunRecord): Promise<RunRecord | null> {
  return requeueOrPark(tx, run.id, run.executionSeq, 'version', run.version);
}

/**
 * Queues again the live execution (`runId`, `executionSeq`, and `guard` = `value`), or parks it
 * when a pause is requested, as an outcome would: `paused` with `resume_status` =
 * `waiting_for_capacity`. Either way the same attempt, available now, `recoveries + 1`, the lease
 * token cleared and the lease row deleted.
 */
async function requeueOrPark(tx: Tx, runId: string, executionSeq: number, guard: 'version' | 'lease_token', value: unknown): Promise<RunRecord | null> {
  const rows = await tx.query(
    `UPDATE runs SET status = CASE WHEN pause_requested = 1 THEN 'paused' ELSE 'waiting_for_capacity' END,
       resume_status = CASE WHEN pause_requested = 1 THEN 'waiting_for_capacity' ELSE resume_status END,
       lease_token = NULL, recoveries = recoveries + 1, available_at = $2, version = version + 1, updated_at = $2
     WHERE id = $1 AND status = 'running' AND execution_seq = $3 AND ${guard} = $4 RETURNING *`,
    [runId, tx.now, executionSeq, value],
  );
  if (rows.length === 0) return null;
  await tx.execute(`DELETE FROM leases WHERE run_id = $1 AND execution_seq = $2`, [runId, executionSeq]);
  return mapRun(rows[0]);
}

/** Resets the consecutive-recovery count once an execution of the run reported normally. */
export async function resetRecoveries(tx: Tx, runId: string): Promise<void> {
  await tx.execute(`UPDATE runs SET recoveries = 0 WHERE id = $1 AND recoveries > 0`, [runId]);
}

/**
 * Queues again an execution its worker gave back (a worker stopping, a stream that closed): status
 * `waiting_for_capacity` with the same attempt, available now, the lease token cleared so a late
 * report of it is stale, and the lease row deleted; `recoveries + 1`, so a job given back forever
 * reaches the recovery ceiling. A run with a pause requested parks instead (`paused`, resumed to
 * the queue), as its segment's report would have parked it. Only while that execution, with
 * `leaseToken`, is still the live one. Returns the row as written, or `null`.
 */
export function requeueReleased(tx: Tx, runId: string, executionSeq: number, leaseToken: string): Promise<RunRecord | null> {
  return requeueOrPark(tx, runId, executionSeq, 'lease_token', leaseToken);
}
