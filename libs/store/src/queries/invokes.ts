import { Tx } from '../tx';

/**
 * One accepted `step.invoke` (DESIGN.md `function_invokes`): the flow map's edge from the parent's
 * function to the child's, and the pending invocation until `settledAt` is set.
 */
export interface InvokeRow {
  parentRunId: string;
  parentStepId: string;
  childRunId: string;
  project: string;
  env: string;
  parentFunctionId: string;
  childFunctionId: string;
  /** A fire-and-forget invoke (`invokeAsync`): the parent resumes once the child is admitted. */
  async: boolean;
  /** Whether the child's `run.created` row has been written (or given up on) by its admission. */
  createdRow: boolean;
  createdAt: number;
  settledAt: number | null;
}

function mapInvoke(r: Record<string, unknown>): InvokeRow {
  return {
    parentRunId: String(r.parent_run_id),
    parentStepId: String(r.parent_step_id),
    childRunId: String(r.child_run_id),
    project: String(r.project),
    env: String(r.env),
    parentFunctionId: String(r.parent_function_id),
    childFunctionId: String(r.child_function_id),
    async: Number(r.async) === 1,
    createdRow: Number(r.created_row) === 1,
    createdAt: Number(r.created_at),
    settledAt: r.settled_at === null || r.settled_at === undefined ? null : Number(r.settled_at),
  };
}

/** Records an accepted invoke, pending, in the report's unit of work. */
export async function insertInvoke(tx: Tx, row: Omit<InvokeRow, 'createdRow' | 'createdAt' | 'settledAt'>): Promise<InvokeRow> {
  const rows = await tx.query(
    `INSERT INTO function_invokes (parent_run_id, parent_step_id, child_run_id, project, env, parent_function_id, child_function_id, async, created_row, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9) RETURNING *`,
    [row.parentRunId, row.parentStepId, row.childRunId, row.project, row.env, row.parentFunctionId, row.childFunctionId, row.async ? 1 : 0, tx.now],
  );
  return mapInvoke(rows[0]);
}

export async function getInvoke(tx: Tx, parentRunId: string, parentStepId: string): Promise<InvokeRow | null> {
  const rows = await tx.query(`SELECT * FROM function_invokes WHERE parent_run_id = $1 AND parent_step_id = $2`, [parentRunId, parentStepId]);
  return rows.length ? mapInvoke(rows[0]) : null;
}

/** Settles a pending invocation; only once. Returns whether this call settled it. */
export async function settleInvoke(tx: Tx, parentRunId: string, parentStepId: string): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE function_invokes SET settled_at = $3 WHERE parent_run_id = $1 AND parent_step_id = $2 AND settled_at IS NULL`,
    [parentRunId, parentStepId, tx.now],
  );
  return r.affected === 1;
}

/** Notes that the child's `run.created` row was written, so a pass that settles the invocation does not write it again. */
export async function markCreatedRow(tx: Tx, parentRunId: string, parentStepId: string): Promise<void> {
  await tx.execute(`UPDATE function_invokes SET created_row = 1 WHERE parent_run_id = $1 AND parent_step_id = $2`, [parentRunId, parentStepId]);
}

/**
 * One page of pending invocations created at or before `createdUpTo`, after the keyset cursor
 * `after`, oldest first (partial index `function_invokes_pending`).
 */
export async function pagePendingInvokes(
  tx: Tx,
  createdUpTo: number,
  after: { createdAt: number; id: string } | null,
  limit: number,
): Promise<InvokeRow[]> {
  const rows = after
    ? await tx.query(
      `SELECT * FROM function_invokes WHERE settled_at IS NULL AND created_at <= $1
         AND (created_at > $2 OR (created_at = $2 AND (parent_run_id > $3 OR (parent_run_id = $3 AND parent_step_id > $4))))
       ORDER BY created_at, parent_run_id, parent_step_id LIMIT $5`,
      [createdUpTo, after.createdAt, ...splitKey(after.id), limit],
    )
    : await tx.query(
      `SELECT * FROM function_invokes WHERE settled_at IS NULL AND created_at <= $1 ORDER BY created_at, parent_run_id, parent_step_id LIMIT $2`,
      [createdUpTo, limit],
    );
  return rows.map(mapInvoke);
}

/** The keyset id of an invocation in `pagePendingInvokes`' order. */
export function invokeKey(row: Pick<InvokeRow, 'parentRunId' | 'parentStepId'>): string {
  return JSON.stringify([row.parentRunId, row.parentStepId]);
}

function splitKey(id: string): [string, string] {
  const [runId, stepId] = JSON.parse(id) as [string, string];
  return [runId, stepId];
}
