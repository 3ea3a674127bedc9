import { RunError, TerminalRunStatus } from '@ironflow/contracts';
import { RunRecord, Tx, mapRun, toJson } from '@ironflow/store';
import { ExecutionFence } from '@ironflow/fencing';

/** A run's outcome: the one write that ends it (specification, "Run outcomes after commit"). */
export type Outcome =
  | { status: 'completed'; output: unknown }
  | { status: 'failed'; error: RunError }
  | { status: 'cancelled'; error: RunError };

/**
 * Which writer may commit: the live execution named by its fence (a worker report), or the
 * engine on a run in a known state at a known version (a wake failing a waiting parent), or any
 * writer while the run is not terminal (a cancel).
 */
export type OutcomeGuard =
  | { kind: 'execution'; fence: ExecutionFence }
  | { kind: 'version'; status: string; version: number }
  | { kind: 'not-terminal' };

/**
 * The terminal commit (DESIGN.md "The outcome transaction"), inside the caller's unit of work:
 * a conditional UPDATE that only a non-terminal run passing `guard` takes, which also sets
 * `wake_pending` for a child, clears `held` (an ended run waits for no admission) and clears a
 * pause (requested or parked: an ended run has no pending pause and nothing to resume), then the
 * idempotent delete of the run's lease. Returns the committed row, from which every follow-up is
 * announced, or `null` when the guard failed and nothing was written. The only place in the
 * codebase that writes a terminal status. On PostgreSQL the update and the lease's delete are one
 * statement (a round trip fewer on every outcome; issue 11).
 */
export async function commitOutcome(tx: Tx, runId: string, outcome: Outcome, guard: OutcomeGuard): Promise<RunRecord | null> {
  const status: TerminalRunStatus = outcome.status;
  const params: unknown[] = [
    runId,
    status,
    outcome.status === 'completed' ? toJson(outcome.output ?? null) : null,
    outcome.status === 'completed' ? null : toJson(outcome.error),
    tx.now,
  ];
  let condition = `status NOT IN ('completed', 'failed', 'cancelled')`;
  if (guard.kind === 'execution') {
    params.push(guard.fence.executionSeq, guard.fence.leaseToken);
    condition += ` AND status = 'running' AND execution_seq = $6 AND lease_token = $7`;
  } else if (guard.kind === 'version') {
    params.push(guard.status, guard.version);
    condition += ` AND status = $6 AND version = $7`;
  }
  const update = `UPDATE runs SET ${terminalAssignments('$2', '$3', '$4', '$5')} WHERE id = $1 AND ${condition} RETURNING *`;
  if (tx.dialect === 'postgres') {
    // One statement: the lease is deleted only when the guarded update took the run.
    const rows = await tx.query(`WITH ended AS (${update}), released AS (DELETE FROM leases WHERE run_id IN (SELECT id FROM ended)) SELECT * FROM ended`, params);
    return rows.length ? mapRun(rows[0]) : null;
  }
  const rows = await tx.query(update, params);
  if (rows.length === 0) return null;
  await tx.execute(`DELETE FROM leases WHERE run_id = $1`, [runId]);
  return mapRun(rows[0]);
}

/**
 * The SET list of a terminal commit, from SQL expressions for the status, the output and the error
 * (JSON text) and the time (ms): the error is kept when a failure names none and cleared on
 * completion, the version moves, a child gets `wake_pending`, `held` and any pause are cleared.
 */
export function terminalAssignments(status: string, output: string, error: string, now: string): string {
  return `status = ${status}, output = ${output}, error = CASE WHEN ${status} = 'completed' THEN NULL ELSE COALESCE(${error}, error) END, version = version + 1,
       ended_at = ${now}, updated_at = ${now},
       wake_pending = CASE WHEN parent_run_id IS NULL THEN 0 ELSE 1 END, held = 0,
       pause_requested = 0, pause_reason = NULL, resume_status = NULL`;
}
