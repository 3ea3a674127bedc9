import { StepResult, StepStatus, StepType } from '@ironflow/contracts';
import { StepRecord, mapStep, toJson } from '../rows';
import { Tx } from '../tx';
import { Statement } from '../sql';

export async function listSteps(tx: Tx, runId: string): Promise<StepRecord[]> {
  const rows = await tx.query(`SELECT * FROM steps WHERE run_id = $1 ORDER BY sequence, created_at`, [runId]);
  return rows.map(mapStep);
}

export async function getStep(tx: Tx, runId: string, stepId: string): Promise<StepRecord | null> {
  const rows = await tx.query(`SELECT * FROM steps WHERE run_id = $1 AND step_id = $2`, [runId, stepId]);
  return rows.length ? mapStep(rows[0]) : null;
}

/**
 * What an invoke step links, read with its run's status in one statement: the step's child run id
 * and status, and its run's status (`null` when the run is gone). `null` when the step is gone.
 */
export async function getInvokeLink(tx: Tx, runId: string, stepId: string): Promise<InvokeLink | null> {
  const { sql, params } = invokeLinkRead(runId, stepId);
  return invokeLinkIn(await tx.query(sql, params));
}

/** What an invoke step links ({@link getInvokeLink}). */
export interface InvokeLink {
  childRunId: string | null;
  status: string;
  runStatus: string | null;
}

/** {@link getInvokeLink}'s statement, to send with others (`Tx.queryTogether`); {@link invokeLinkIn} reads its rows. */
export function invokeLinkRead(runId: string, stepId: string): Statement {
  return {
    sql: `SELECT s.child_run_id, s.status, r.status AS run_status FROM steps s LEFT JOIN runs r ON r.id = s.run_id WHERE s.run_id = $1 AND s.step_id = $2`,
    params: [runId, stepId],
  };
}

/** The link in the rows of {@link invokeLinkRead}; `null` when the step is gone. */
export function invokeLinkIn(rows: Record<string, unknown>[]): InvokeLink | null {
  const row = rows[0];
  return row ? { childRunId: (row.child_run_id as string | null) ?? null, status: String(row.status), runStatus: (row.run_status as string | null) ?? null } : null;
}

/** Sequence the next new step of a run takes: max over all its step rows + 1, 0 when none (3.7). */
export async function nextStepSequence(tx: Tx, runId: string): Promise<number> {
  const rows = await tx.query<{ m: unknown }>(`SELECT MAX(sequence) AS m FROM steps WHERE run_id = $1`, [runId]);
  const max = rows[0]?.m;
  return max === null || max === undefined ? 0 : Number(max) + 1;
}

/**
 * Saves the steps a worker reported, in order from `sequenceStart`. A step already `completed`
 * is never changed (a repeated report inserts nothing); a failed attempt's row is replaced by
 * the next attempt's result.
 */
export async function saveReportedSteps(tx: Tx, runId: string, steps: StepResult[], sequenceStart: number): Promise<void> {
  let sequence = sequenceStart;
  for (const step of steps) {
    const row = reportedStepRow(step, sequence, tx.now);
    await tx.execute(
      `INSERT INTO steps (run_id, step_id, name, type, status, output, error, sequence, created_at, ended_at, started_at)
       VALUES ($1, $2, $3, 'run', $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (run_id, step_id) DO UPDATE SET ${REPORTED_STEP_UPSERT}`,
      [runId, row.stepId, row.name, row.status, row.output, row.error, row.sequence, tx.now, row.endedAt, row.startedAt],
    );
    sequence += 1;
  }
}

/**
 * What a reported step's row is upserted with (`ON CONFLICT (run_id, step_id) DO UPDATE SET …`):
 * a step already `completed` is never changed; a failed attempt's row takes the new result.
 */
export const REPORTED_STEP_UPSERT = `status = excluded.status, output = excluded.output,
         error = excluded.error, ended_at = excluded.ended_at, started_at = excluded.started_at
       WHERE steps.status <> 'completed'`;

/** The column values of a reported step's row (type `run`, `created_at` = the unit's `now`): JSON as text, times in ms. */
export interface ReportedStepRow {
  stepId: string;
  name: string;
  status: StepStatus;
  output: string | null;
  error: string | null;
  sequence: number;
  endedAt: number;
  startedAt: number | null;
}

/** The row of `step` reported at `sequence`; a step without a readable `ended_at` ends at `now`. */
export function reportedStepRow(step: StepResult, sequence: number, now: number): ReportedStepRow {
  const status: StepStatus = step.status === 'completed' ? 'completed' : 'failed';
  const endedAt = step.ended_at ? Date.parse(step.ended_at) || now : now;
  return { stepId: step.id, name: step.name, status, output: toJson(step.output), error: toJson(step.error), sequence, endedAt, startedAt: startedAtOf(step, endedAt) };
}

/**
 * When a reported step started (ms, the worker's clock like its `ended_at`): its `started_at`, else
 * `ended_at` − `duration_ms`; `null` when it says neither, or a start after its end.
 */
function startedAtOf(step: StepResult, endedAt: number): number | null {
  const parsed = step.started_at ? Date.parse(step.started_at) : NaN;
  const started = Number.isFinite(parsed) ? parsed : typeof step.duration_ms === 'number' && Number.isFinite(step.duration_ms) && step.duration_ms >= 0 ? endedAt - Math.round(step.duration_ms) : null;
  return started !== null && started <= endedAt ? started : null;
}

export interface NewWaitStep {
  runId: string;
  stepId: string;
  name: string;
  type: Exclude<StepType, 'run'>;
  status: StepStatus;
  output?: unknown;
  wakeAt?: number | null;
  timeoutAt?: number | null;
  childRunId?: string | null;
  sequence: number;
}

/** Inserts the row of the wait a segment yielded at; a repeated yield inserts nothing. */
export async function insertWaitStep(tx: Tx, step: NewWaitStep): Promise<boolean> {
  const { sql, params } = insertWaitStepStatement(step, tx.now);
  const r = await tx.execute(sql, params);
  return r.affected === 1;
}

/** The statement of {@link insertWaitStep}, `now` the store clock's ms. */
export function insertWaitStepStatement(step: NewWaitStep, now: number): Statement {
  return {
    sql: `INSERT INTO steps (run_id, step_id, name, type, status, output, wake_at, timeout_at, child_run_id, sequence, created_at, ended_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (run_id, step_id) DO NOTHING`,
    params: [step.runId, step.stepId, step.name, step.type, step.status, toJson(step.output), step.wakeAt ?? null,
      step.timeoutAt ?? null, step.childRunId ?? null, step.sequence, now, step.status === 'waiting' ? null : now],
  };
}

/**
 * Resolves a waiting invoke step with its child's outcome. Updates only while the step is
 * `waiting`, belongs to `runId` and links `childRunId` (the specification's wake guard). Either
 * way the wake is applied: the child's `wake_pending` flag is cleared (on PostgreSQL by the same
 * statement), so the waiting-run pass reads only lost wakes.
 */
export async function resolveInvokeStep(
  tx: Tx,
  runId: string,
  stepId: string,
  childRunId: string,
  status: 'completed' | 'failed',
  output: unknown,
  error: unknown,
): Promise<boolean> {
  const wake = `UPDATE runs SET wake_pending = 0 WHERE id = $3 AND wake_pending = 1`;
  if (tx.dialect !== 'postgres') await tx.execute(wake, [runId, stepId, childRunId]);
  const r = await tx.execute(
    `${tx.dialect === 'postgres' ? `WITH wake AS (${wake}) ` : ''}UPDATE steps SET status = $4, output = $5, error = $6, ended_at = $7
     WHERE run_id = $1 AND step_id = $2 AND child_run_id = $3 AND type = 'invoke' AND status = 'waiting'`,
    [runId, stepId, childRunId, status, toJson(output), toJson(error), tx.now],
  );
  return r.affected === 1;
}

/**
 * The sleep sweep's claim (specification, "A sleep wakeup gives up on a lock after 1 s"): due
 * sleeps (`wake_at` passed, not claimed), oldest first. On PostgreSQL each one is claimed
 * (`claimed_at` = now) and rows another transaction holds are skipped (`FOR UPDATE SKIP LOCKED`),
 * so two sweeps never take the same sleep and a locked step row never holds the sweep; a claimed
 * sleep whose wakeup gave up is not seen again until `releaseStaleClaims` frees it. On SQLite units
 * of work run one at a time, so the due sleeps are only read (no claim).
 */
export async function claimDueSleeps(tx: Tx, limit: number): Promise<StepRecord[]> {
  const due = `SELECT run_id, step_id FROM steps WHERE status = 'waiting' AND type = 'sleep' AND wake_at <= $1 AND claimed_at IS NULL
     ORDER BY wake_at LIMIT $2`;
  const rows = tx.dialect === 'postgres'
    ? await tx.query(`UPDATE steps SET claimed_at = $1 WHERE (run_id, step_id) IN (${due}${tx.forUpdateSkipLocked}) RETURNING *`, [tx.now, limit])
    : await tx.query(`SELECT * FROM steps WHERE (run_id, step_id) IN (${due})`, [tx.now, limit]);
  return rows.map(mapStep).sort((x, y) => (x.wakeAt ?? 0) - (y.wakeAt ?? 0));
}

/**
 * The stale-claim recovery: frees up to `limit` claims of sleeps still waiting that were taken at
 * or before `claimedUpTo` (ms, store clock), so a later sweep wakes them. Rows another
 * transaction holds are skipped and left to the next call. Returns how many were freed.
 */
export async function releaseStaleClaims(tx: Tx, claimedUpTo: number, limit: number): Promise<number> {
  const r = await tx.execute(
    `UPDATE steps SET claimed_at = NULL WHERE (run_id, step_id) IN (
       SELECT run_id, step_id FROM steps WHERE status = 'waiting' AND type = 'sleep' AND claimed_at IS NOT NULL AND claimed_at <= $1
        LIMIT $2${tx.forUpdateSkipLocked})`,
    [claimedUpTo, limit],
  );
  return r.affected;
}

/** Frees the claims of `steps` (sleeps a sweep claimed and did not wake), skipping rows another transaction holds. */
export async function releaseClaims(tx: Tx, steps: Pick<StepRecord, 'runId' | 'stepId'>[]): Promise<void> {
  for (const step of steps) {
    await tx.execute(
      `UPDATE steps SET claimed_at = NULL WHERE (run_id, step_id) IN (
         SELECT run_id, step_id FROM steps WHERE run_id = $1 AND step_id = $2 AND status = 'waiting'${tx.forUpdateSkipLocked})`,
      [step.runId, step.stepId],
    );
  }
}

/**
 * Invoke or `waitForEvent` steps whose timeout has passed while still waiting, oldest first. An
 * invoke step whose child has ended is left out until `endedChildGraceUpTo` (ms, store clock: now
 * minus the invoke grace) has passed its timeout, so a late wake is not turned into a timeout.
 */
export async function listDueTimeouts(tx: Tx, type: 'invoke' | 'wait_for_event', endedChildGraceUpTo: number, limit: number): Promise<StepRecord[]> {
  const rows = await tx.query(
    `SELECT s.* FROM steps s WHERE s.status = 'waiting' AND s.type = $1 AND s.timeout_at <= $2
        AND NOT (s.type = 'invoke' AND s.timeout_at > $3
                 AND EXISTS (SELECT 1 FROM runs c WHERE c.id = s.child_run_id AND c.status IN ('completed', 'failed', 'cancelled')))
      ORDER BY s.timeout_at LIMIT $4`,
    [type, tx.now, endedChildGraceUpTo, limit],
  );
  return rows.map(mapStep);
}

/** Ends a waiting step (a sleep that is due, an invoke that timed out); only from `waiting`. */
export async function endWaitingStep(tx: Tx, runId: string, stepId: string, status: 'completed' | 'timed_out'): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE steps SET status = $3, ended_at = $4 WHERE run_id = $1 AND step_id = $2 AND status = 'waiting'`,
    [runId, stepId, status, tx.now],
  );
  return r.affected === 1;
}

/** Completes a waiting `waitForEvent` step with the event that satisfied it; only from `waiting`. */
export async function completeWaitStep(tx: Tx, runId: string, stepId: string, output: unknown): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE steps SET status = 'completed', output = $3, ended_at = $4 WHERE run_id = $1 AND step_id = $2 AND status = 'waiting'`,
    [runId, stepId, toJson(output), tx.now],
  );
  return r.affected === 1;
}


/** A waiting invoke step whose linked child has ended, as the waiting-run pass reads it. */
export interface EndedInvokeWait {
  parentRunId: string;
  stepId: string;
  childRunId: string;
  /** Whether the parent's execution holds a lease (the pass then skips it). */
  parentLeased: boolean;
}

/**
 * One page of the waiting-run pass (specification, "A parent run is woken once"): waiting
 * parents, ordered by id after `afterRunId`, with a waiting invoke step whose child has ended.
 * Also returns the last parent id read, the next page's cursor (`null` at the end).
 */
export async function pageEndedInvokeWaits(tx: Tx, afterRunId: string, pageSize: number): Promise<{ waits: EndedInvokeWait[]; nextCursor: string | null }> {
  const parents = await tx.query<{ id: string }>(
    `SELECT id FROM runs WHERE status = 'waiting' AND id > $1 ORDER BY id LIMIT $2`,
    [afterRunId, pageSize],
  );
  if (parents.length === 0) return { waits: [], nextCursor: null };
  const ids = parents.map((p) => p.id);
  const rows = await tx.query(
    `SELECT s.run_id, s.step_id, s.child_run_id,
            CASE WHEN EXISTS (SELECT 1 FROM leases l WHERE l.run_id = s.run_id) THEN 1 ELSE 0 END AS parent_leased
       FROM steps s JOIN runs c ON c.id = s.child_run_id
      WHERE s.run_id IN (${ids.map((_, i) => `$${i + 1}`).join(', ')})
        AND s.type = 'invoke' AND s.status = 'waiting'
        AND c.status IN ('completed', 'failed', 'cancelled')
      ORDER BY s.run_id`,
    ids,
  );
  return {
    waits: rows.map((r) => ({ parentRunId: String(r.run_id), stepId: String(r.step_id), childRunId: String(r.child_run_id), parentLeased: Number(r.parent_leased) === 1 })),
    nextCursor: parents.length < pageSize ? null : ids[ids.length - 1],
  };
}

/** Children a run waits on through a sync `step.invoke` (its waiting invoke steps). */
export async function listWaitingInvokeChildren(tx: Tx, runId: string): Promise<string[]> {
  const rows = await tx.query<{ child_run_id: string }>(
    `SELECT child_run_id FROM steps WHERE run_id = $1 AND type = 'invoke' AND status = 'waiting' AND child_run_id IS NOT NULL`,
    [runId],
  );
  return rows.map((r) => String(r.child_run_id));
}
