import { RunRecord, mapRun } from '../rows';
import { Statement, numberedTogether } from '../sql';
import { Tx } from '../tx';
import { NewRun, insertRun, insertRunStatement } from './runs';
import { NewWaitStep, insertWaitStep, insertWaitStepStatement } from './steps';

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

/** An accepted invoke as {@link insertInvoke} records it. */
export type NewInvoke = Omit<InvokeRow, 'createdRow' | 'createdAt' | 'settledAt'>;

/** Records an accepted invoke, pending, in the report's unit of work. */
export async function insertInvoke(tx: Tx, row: NewInvoke): Promise<InvokeRow> {
  const { sql, params } = insertInvokeStatement(row, tx.now);
  const rows = await tx.query(sql, params);
  return mapInvoke(rows[0]);
}

function insertInvokeStatement(row: NewInvoke, now: number): Statement {
  return {
    sql: `INSERT INTO function_invokes (parent_run_id, parent_step_id, child_run_id, project, env, parent_function_id, child_function_id, async, created_row, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9) RETURNING *`,
    params: [row.parentRunId, row.parentStepId, row.childRunId, row.project, row.env, row.parentFunctionId, row.childFunctionId, row.async ? 1 : 0, now],
  };
}

/**
 * The writes of an accepted `step.invoke` in the report's unit of work: the child run (`child`,
 * inserted as `insertRun` inserts it), the parent's invoke step (`step`, as `insertWaitStep`) and
 * the pending invocation (`invoke`, as {@link insertInvoke}); on PostgreSQL in one statement
 * (issue 11: two round trips fewer while the report holds the parent's row), on SQLite in three.
 * Returns the child's row and the invocation's.
 */
export async function insertInvokedChild(tx: Tx, child: NewRun, step: NewWaitStep, invoke: NewInvoke): Promise<{ run: RunRecord; invoke: InvokeRow }> {
  if (tx.dialect !== 'postgres') {
    const run = await insertRun(tx, child);
    await insertWaitStep(tx, step);
    return { run, invoke: await insertInvoke(tx, invoke) };
  }
  const { texts: [runSql, stepSql, invokeSql], params } = numberedTogether([insertRunStatement(child, tx.now), insertWaitStepStatement(step, tx.now), insertInvokeStatement(invoke, tx.now)]);
  const rows = await tx.query(
    `WITH child AS (${runSql}), step AS (${stepSql}), invoke AS (${invokeSql})
     SELECT child.*, (SELECT row_to_json(invoke) FROM invoke) AS invoke_row FROM child`,
    params,
  );
  return { run: mapRun(rows[0]), invoke: mapInvoke(rows[0].invoke_row as Record<string, unknown>) };
}

export async function getInvoke(tx: Tx, parentRunId: string, parentStepId: string): Promise<InvokeRow | null> {
  const rows = await tx.query(`SELECT * FROM function_invokes WHERE parent_run_id = $1 AND parent_step_id = $2`, [parentRunId, parentStepId]);
  return rows.length ? mapInvoke(rows[0]) : null;
}

/** Settles a pending invocation; only once. Returns whether this call settled it. */
export async function settleInvoke(tx: Tx, parentRunId: string, parentStepId: string): Promise<boolean> {
  const { sql, params } = settleInvokeWrite(tx, parentRunId, parentStepId);
  return (await tx.query(sql, params)).length === 1;
}

/** {@link settleInvoke}'s statement, to send with others (`Tx.queryTogether`): it returns one row when it settled the invocation. */
export function settleInvokeWrite(tx: Tx, parentRunId: string, parentStepId: string): Statement {
  return {
    sql: `UPDATE function_invokes SET settled_at = $3 WHERE parent_run_id = $1 AND parent_step_id = $2 AND settled_at IS NULL RETURNING parent_step_id`,
    params: [parentRunId, parentStepId, tx.now],
  };
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
