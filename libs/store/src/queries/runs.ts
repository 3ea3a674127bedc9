import { ExecutionMode, RunStatus, TERMINAL_RUN_STATUSES } from '@ironflow/contracts';
import { EventRecord, FunctionRecord, RunRecord, StepRecord, mapEvent, mapFunction, mapRun, mapStep, toJson } from '../rows';
import { Statement, placeholders } from '../sql';
import { Tx } from '../tx';
import { frozenIn, frozenRead, isFrozen, thawedForRun } from './authority';
import { getFunction } from './functions';
import { LEASE_REPLACED, NewLease, insertLease } from './leases';

/**
 * SQL over the `runs` table that never writes a terminal status: those writes live in
 * `libs/outcome` alone (a test over the source enforces it).
 */

export interface NewRun {
  id: string;
  project: string;
  env: string;
  functionId: string;
  functionVersion: number;
  mode: ExecutionMode;
  eventId: string | null;
  maxAttempts: number;
  input: unknown;
  parentRunId?: string;
  parentStepId?: string;
  concurrencyKey?: string | null;
  concurrencyLimit?: number | null;
  /** Insert the run held: claims skip it until its admission releases it (`releaseHeld`). */
  held?: boolean;
}

/** Inserts a run in `waiting_for_capacity`, available now (unless `held`), attempt 1. Returns the row. */
export async function insertRun(tx: Tx, run: NewRun): Promise<RunRecord> {
  const { sql, params } = insertRunStatement(run, tx.now);
  const rows = await tx.query(sql, params);
  return mapRun(rows[0]);
}

/** The statement of {@link insertRun} (`RETURNING *`), `now` the store clock's ms. */
export function insertRunStatement(run: NewRun, now: number): Statement {
  return {
    sql: `INSERT INTO runs (id, project, env, function_id, function_version, mode, event_id, status, version,
       attempt, max_attempts, execution_seq, available_at, recoveries, parent_run_id, parent_step_id,
       wake_pending, concurrency_key, concurrency_limit, input, created_at, updated_at, held)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'waiting_for_capacity', 1, 1, $8, 0, $9, 0, $10, $11, 0, $12, $14, $13, $9, $9, $15)
     RETURNING *`,
    params: [run.id, run.project, run.env, run.functionId, run.functionVersion, run.mode, run.eventId, run.maxAttempts,
      now, run.parentRunId ?? null, run.parentStepId ?? null, run.concurrencyKey ?? null, toJson(run.input ?? null), run.concurrencyLimit ?? null,
      run.held ? 1 : 0],
  };
}

/** Reads one run; with `lock` the row is locked until the unit of work ends (PostgreSQL). */
export async function getRun(tx: Tx, id: string, opts: { lock?: boolean } = {}): Promise<RunRecord | null> {
  const rows = await tx.query(`SELECT * FROM runs WHERE id = $1${opts.lock ? tx.forUpdate : ''}`, [id]);
  return rows.length ? mapRun(rows[0]) : null;
}

/**
 * A run and its function (`null` when the function is gone), the run's row locked with `lock`
 * (`FOR UPDATE` on PostgreSQL): on PostgreSQL in one statement (issue 11: a wake and an admission
 * read both, one round trip fewer), on SQLite in two. `functionId`: read that function of the
 * run's project and env instead of the run's own (a `step.invoke` report's target). `null` when
 * the run does not exist.
 */
export async function getRunWithFunction(tx: Tx, id: string, opts: { lock?: boolean; functionId?: string } = {}): Promise<RunWithFunction | null> {
  if (tx.dialect !== 'postgres') {
    const run = await getRun(tx, id, opts);
    return run && { run, fn: await getFunction(tx, run.project, run.env, opts.functionId ?? run.functionId) };
  }
  const { sql, params } = runWithFunctionRead(tx, id, opts);
  return runWithFunctionIn(await tx.query(sql, params));
}

/** A run and a function of its project and env (`getRunWithFunction`). */
export interface RunWithFunction {
  run: RunRecord;
  fn: FunctionRecord | null;
}

/** PostgreSQL: {@link getRunWithFunction}'s one statement; {@link runWithFunctionIn} reads its rows. */
function runWithFunctionRead(tx: Tx, id: string, opts: { lock?: boolean; functionId?: string }): Statement {
  return {
    sql: `SELECT runs.*, ${functionOfRun(opts.functionId === undefined ? undefined : '$2')} AS run_function
     FROM runs WHERE id = $1${opts.lock ? tx.forUpdate : ''}`,
    params: opts.functionId === undefined ? [id] : [id, opts.functionId],
  };
}

/** The run and its function in the rows of {@link runWithFunctionRead}; `null` when the run does not exist. */
function runWithFunctionIn(rows: Record<string, unknown>[]): RunWithFunction | null {
  if (!rows.length) return null;
  const fn = rows[0].run_function as Record<string, unknown> | null;
  return { run: mapRun(rows[0]), fn: fn ? mapFunction(fn) : null };
}

/**
 * What begins a wake or an admission: whether the instance is frozen (`isFrozen`: the authority
 * row read `FOR SHARE`) and the run with its function, its row locked (`getRunWithFunction`). On
 * PostgreSQL both go in one round trip, with the unit's BEGIN (`Tx.queryTogether`, issue 11),
 * and run in that order: the authority row is read first, then the run's row is locked, as when
 * read one after the other. A frozen instance's unit has then read (and locked) the run too; its
 * caller writes nothing and the unit ends.
 */
export async function getRunWithFunctionIfThawed(tx: Tx, id: string): Promise<{ frozen: boolean; read: RunWithFunction | null }> {
  if (tx.dialect !== 'postgres') {
    if (await isFrozen(tx)) return { frozen: true, read: null };
    return { frozen: false, read: await getRunWithFunction(tx, id, { lock: true }) };
  }
  const [authority, run] = await tx.queryTogether([frozenRead(tx), runWithFunctionRead(tx, id, { lock: true })]);
  return { frozen: frozenIn(authority), read: runWithFunctionIn(run) };
}

export async function getRunInScope(tx: Tx, project: string, env: string, id: string): Promise<RunRecord | null> {
  const rows = await tx.query(`SELECT * FROM runs WHERE id = $1 AND project = $2 AND env = $3`, [id, project, env]);
  return rows.length ? mapRun(rows[0]) : null;
}

/**
 * The runs among `ids` (a run not found is left out, order unspecified). PostgreSQL: one statement
 * text for any number of ids (an array), so it is prepared once instead of once per list length.
 */
export async function getRuns(tx: Tx, ids: string[]): Promise<RunRecord[]> {
  if (ids.length === 0) return [];
  const rows = tx.dialect === 'postgres'
    ? await tx.query(`SELECT * FROM runs WHERE id = ANY($1::text[])`, [ids])
    : await tx.query(`SELECT * FROM runs WHERE id IN (${placeholders(1, ids.length)})`, ids);
  return rows.map(mapRun);
}

/** `status IN (…)` of the terminal statuses, constants of the code (no parameter). */
const ENDED = `status IN (${TERMINAL_RUN_STATUSES.map((status) => `'${status}'`).join(', ')})`;
/** Most run ids one SQLite statement reads (it binds at most 32766 parameters; plenty of margin). */
const SQLITE_IDS_PER_STATEMENT = 500;

/**
 * The runs among `ids` that have ended (`completed`, `failed`, `cancelled`), in no order; a run
 * not found or still going is left out. The sync calls' store poll (`SyncPoll`). PostgreSQL: one
 * statement of fixed shape whatever the number of ids (an array, so it is prepared once);
 * SQLite: one statement per 500 ids.
 */
export async function getEndedRuns(tx: Tx, ids: string[]): Promise<RunRecord[]> {
  if (ids.length === 0) return [];
  if (tx.dialect === 'postgres') return (await tx.query(`SELECT * FROM runs WHERE id = ANY($1::text[]) AND ${ENDED}`, [ids])).map(mapRun);
  const runs: RunRecord[] = [];
  for (let i = 0; i < ids.length; i += SQLITE_IDS_PER_STATEMENT) {
    const chunk = ids.slice(i, i + SQLITE_IDS_PER_STATEMENT);
    for (const row of await tx.query(`SELECT * FROM runs WHERE id IN (${placeholders(1, chunk.length)}) AND ${ENDED}`, chunk)) runs.push(mapRun(row));
  }
  return runs;
}

export async function listChildRuns(tx: Tx, parentRunId: string): Promise<RunRecord[]> {
  const rows = await tx.query(`SELECT * FROM runs WHERE parent_run_id = $1 ORDER BY created_at, id`, [parentRunId]);
  return rows.map(mapRun);
}

export interface RunFilter {
  functionId?: string;
  status?: RunStatus;
  limit: number;
  /** Opaque cursor: `<created_at>:<id>` of the last row of the previous page. */
  cursor?: { createdAt: number; id: string };
}

/** Newest first. */
export async function listRuns(tx: Tx, project: string, env: string, filter: RunFilter): Promise<{ runs: RunRecord[]; total: number }> {
  const where = ['project = $1', 'env = $2'];
  const params: unknown[] = [project, env];
  if (filter.functionId) { params.push(filter.functionId); where.push(`function_id = $${params.length}`); }
  if (filter.status) { params.push(filter.status); where.push(`status = $${params.length}`); }
  const countRows = await tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM runs WHERE ${where.join(' AND ')}`, params);
  if (filter.cursor) {
    params.push(filter.cursor.createdAt, filter.cursor.id);
    where.push(`(created_at < $${params.length - 1} OR (created_at = $${params.length - 1} AND id < $${params.length}))`);
  }
  params.push(filter.limit);
  const rows = await tx.query(
    `SELECT * FROM runs WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
    params,
  );
  return { runs: rows.map(mapRun), total: Number(countRows[0].n) };
}

export interface ClaimFilter {
  mode: ExecutionMode;
  limit: number;
  project?: string;
  env?: string;
  functionIds?: string[];
}

/** What a worker needs besides the run to execute its segment: the function, the run's event and its steps in order. */
export interface SegmentRows {
  fn: FunctionRecord | null;
  event: EventRecord | null;
  steps: StepRecord[];
}

/** A claimed run; on PostgreSQL with its segment's rows, read by the claim's own update (issue 11). */
export interface ClaimedRun extends RunRecord {
  segmentRows?: SegmentRows;
}

/**
 * A function of the project and env of the `runs` row in scope, as JSON (null when it is gone):
 * the one whose id is the SQL expression `id`, by default the run's own.
 */
const functionOfRun = (id = 'runs.function_id') => `(SELECT row_to_json(f) FROM functions f WHERE f.project = runs.project AND f.env = runs.env AND f.id = ${id})`;

/**
 * PostgreSQL: the columns a claim's `UPDATE … RETURNING *` adds to return the claimed run's
 * segment in the same statement (the reads of {@link SegmentRows}, each as JSON).
 */
const SEGMENT_COLUMNS = `,
       ${functionOfRun()} AS segment_function,
       (SELECT row_to_json(e) FROM events e WHERE e.id = runs.event_id) AS segment_event,
       (SELECT COALESCE(json_agg(s ORDER BY s.sequence, s.created_at), '[]'::json) FROM steps s WHERE s.run_id = runs.id) AS segment_steps`;

function claimedRunOf(row: Record<string, unknown>): ClaimedRun {
  const run: ClaimedRun = mapRun(row);
  if ('segment_steps' in row) {
    const fn = row.segment_function as Record<string, unknown> | null;
    const event = row.segment_event as Record<string, unknown> | null;
    run.segmentRows = {
      fn: fn ? mapFunction(fn) : null,
      event: event ? mapEvent(event) : null,
      steps: (row.segment_steps as Record<string, unknown>[]).map(mapStep),
    };
  }
  return run;
}

/**
 * The conditions on a `runs` row that {@link claimRuns} would claim for `filter` (queued,
 * available, not held, the instance thawed: `thawed`, by default {@link thawedForRun}), with their
 * parameters; null when the filter admits no run (an empty `functionIds`).
 */
function claimableWhere(tx: Tx, filter: ClaimFilter, thawed = thawedForRun(tx)): { where: string[]; params: unknown[] } | null {
  const where = [`status = 'waiting_for_capacity'`, 'mode = $1', 'available_at <= $2', 'held = 0', thawed];
  const params: unknown[] = [filter.mode, tx.now];
  if (filter.project !== undefined) { params.push(filter.project); where.push(`project = $${params.length}`); }
  if (filter.env !== undefined) { params.push(filter.env); where.push(`env = $${params.length}`); }
  if (filter.functionIds) {
    if (filter.functionIds.length === 0) return null;
    where.push(`function_id IN (${placeholders(params.length + 1, filter.functionIds.length)})`);
    params.push(...filter.functionIds);
  }
  return { where, params };
}

/**
 * Whether {@link claimRuns} would find a queued segment for `filter` now, read without a lock or
 * a transaction: one round trip instead of a claim's three when nothing is queued (issue 11). A
 * row another claimer holds counts; a run queued just after the read is not seen (its hint wakes
 * the claimer).
 */
export async function hasClaimable(tx: Tx, filter: ClaimFilter): Promise<boolean> {
  // The authority row read without a share lock: a read needs no freeze kept out.
  const claimable = claimableWhere(tx, filter, `EXISTS (SELECT 1 FROM instance_authority WHERE id = 1 AND state <> 'frozen')`);
  if (!claimable) return false;
  return (await tx.query(`SELECT 1 AS one FROM runs WHERE ${claimable.where.join(' AND ')} LIMIT 1`, claimable.params)).length > 0;
}

/**
 * Claims up to `limit` queued segments (DESIGN.md "The queue is the runs table"): runs in
 * `waiting_for_capacity` whose `available_at` has passed and that are not held for their
 * admission, oldest first, skipping rows another claimer holds. Each claimed run moves to `running` with `execution_seq` bumped and the given
 * new lease token; the caller inserts the lease rows in the same unit of work. A frozen instance
 * claims nothing: the candidates' read checks the authority row ({@link thawedForRun}), so no
 * freeze commits before this unit of work ends. On PostgreSQL each claimed run comes with its
 * segment's rows (`segmentRows`), read by its claiming update.
 */
export async function claimRuns(tx: Tx, filter: ClaimFilter, newToken: () => string): Promise<ClaimedRun[]> {
  const claimable = claimableWhere(tx, filter);
  if (!claimable) return [];
  const { where, params } = claimable;
  // Candidates are read (and locked) a batch of `limit` at a time; a further batch is read only
  // when a full lane skipped some, so a claimer locks about what it claims and concurrent
  // claimers are not starved, while a full lane does not hide the runs behind it.
  const claimed: ClaimedRun[] = [];
  const taken = new Map<string, number>();
  type Candidate = { id: string; available_at: unknown; function_id: string; concurrency_key: string | null; concurrency_limit: unknown };
  let after: { availableAt: number; id: string } | null = null;
  for (let batch = 0; batch < MAX_CLAIM_BATCHES && claimed.length < filter.limit; batch += 1) {
    const cursor: { availableAt: number; id: string } | null = after;
    const batchWhere: string[] = cursor ? [...where, `(available_at > $${params.length + 1} OR (available_at = $${params.length + 1} AND id > $${params.length + 2}))`] : where;
    const batchParams: unknown[] = cursor ? [...params, cursor.availableAt, cursor.id] : [...params];
    batchParams.push(filter.limit - claimed.length);
    const candidates: Candidate[] = await tx.query<Candidate>(
      `SELECT id, available_at, function_id, concurrency_key, concurrency_limit FROM runs WHERE ${batchWhere.join(' AND ')}
       ORDER BY available_at, id LIMIT $${batchParams.length}${tx.forUpdateSkipLocked}`,
      batchParams,
    );
    if (candidates.length === 0) break;
    let skipped = 0;
    // PostgreSQL: the candidates outside any lane are claimed by one statement (issue 11: one
    // round trip for the batch, not one per run); a lane's limit is checked run by run.
    const free = tx.dialect === 'postgres' ? candidates.filter((c) => c.concurrency_limit === null || c.concurrency_limit === undefined) : [];
    const freeClaimed = await claimFreeCandidates(tx, free.map((c) => c.id), newToken);
    for (const candidate of candidates) {
      after = { availableAt: Number(candidate.available_at), id: candidate.id };
      const claimedOne = free.includes(candidate) ? freeClaimed.get(candidate.id) ?? null : await claimCandidate(tx, candidate, taken, newToken, undefined, tx.dialect === 'postgres');
      if (claimedOne) claimed.push(claimedOne);
      else skipped += 1;
    }
    if (skipped === 0) break;
  }
  return claimed;
}

/**
 * Claims a run its own unit of work just inserted (a trigger that dispatches at once), as
 * {@link claimRuns} claims a candidate: lane limit checked, execution bumped, new lease token.
 * Null when its lane is full, the instance is frozen (the claim's write checks the authority row,
 * {@link thawedForRun}) or it is not queued and free to claim (held, not yet available).
 */
export async function claimInsertedRun(tx: Tx, run: RunRecord, newToken: () => string): Promise<RunRecord | null> {
  if (run.status !== 'waiting_for_capacity' || run.held || run.availableAt > tx.now) return null;
  return claimCandidate(tx, { id: run.id, function_id: run.functionId, concurrency_key: run.concurrencyKey, concurrency_limit: run.concurrencyLimit }, new Map(), newToken, thawedForRun(tx));
}

/**
 * Where a claim at once takes a run from, in the unit of work that ends the run's wait, and what
 * it sets on the way to `running`: `waiting`, a parent its wake resumes, or `held`, a queued child
 * its admission releases. Either way it becomes available now, as a queued segment would be.
 */
export type ClaimAtOnceFrom = 'waiting' | 'held';

/** The row a claim at once moves: a `waiting` run is never held (`held` only holds a run before its first segment). */
const CLAIM_AT_ONCE_FROM: Record<ClaimAtOnceFrom, string> = {
  waiting: `status = 'waiting'`,
  held: `status = 'waiting_for_capacity' AND held = 1`,
};

/**
 * Claims `run` straight from `from` (a parent its wake resumes, a child its admission releases)
 * in one statement instead of queueing it and claiming it after, as {@link claimRuns} claims a
 * candidate: lane limit checked, execution bumped, new lease token, and on PostgreSQL its
 * segment's rows read by the claiming update. The caller's unit of work has read the instance
 * authority row (`FOR SHARE`: no freeze commits before it ends) and found it thawed. With `lease`
 * (the claimer's: holder, lane, expiry and deadline, store-clock ms) the claimed execution's lease
 * is inserted as `insertLease` inserts it, on PostgreSQL by the same statement (issue 11: one round
 * trip fewer in a wake and an admission). Null when its lane is full or the row is not in `from`:
 * nothing was written, and the caller queues it instead.
 */
export async function claimRunAtOnce(tx: Tx, run: RunRecord, from: ClaimAtOnceFrom, newToken: () => string, lease?: LeaseOfClaim): Promise<ClaimedRun | null> {
  if (!(await laneHasRoom(tx, { function_id: run.functionId, concurrency_key: run.concurrencyKey, concurrency_limit: run.concurrencyLimit }, new Map()))) return null;
  const claim = `UPDATE runs SET held = 0, available_at = $3, status = 'running', execution_seq = execution_seq + 1, lease_token = $2,
       version = version + 1, started_at = COALESCE(started_at, $3), updated_at = $3
     WHERE id = $1 AND ${CLAIM_AT_ONCE_FROM[from]}`;
  if (tx.dialect === 'postgres' && lease) {
    const rows = await tx.query(
      `WITH claimed AS (${claim} RETURNING *),
       lease AS (
         INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at, deadline_at) SELECT id, execution_seq, $4::text, $5::text, $6::bigint, $7::bigint FROM claimed
         ${LEASE_REPLACED}
       )
       SELECT runs.*${SEGMENT_COLUMNS} FROM claimed runs`,
      [run.id, newToken(), tx.now, lease.holder, lease.lane, lease.expiresAt, lease.deadlineAt],
    );
    return rows.length ? claimedRunOf(rows[0]) : null;
  }
  const rows = await tx.query(`${claim} RETURNING *${tx.dialect === 'postgres' ? SEGMENT_COLUMNS : ''}`, [run.id, newToken(), tx.now]);
  if (!rows.length) return null;
  const claimed = claimedRunOf(rows[0]);
  if (lease) await insertLease(tx, claimed.id, claimed.executionSeq, lease.holder, lease.lane, lease.expiresAt, lease.deadlineAt);
  return claimed;
}

/** The lease a claim at once inserts ({@link claimRunAtOnce}): the claimer, the run's lane, expiry and deadline (store-clock ms). */
export type LeaseOfClaim = Omit<NewLease, 'runId' | 'executionSeq'>;

async function claimCandidate(
  tx: Tx,
  candidate: { id: string; function_id: string; concurrency_key: string | null; concurrency_limit: unknown },
  taken: Map<string, number>,
  newToken: () => string,
  guard?: string,
  withSegment = false,
): Promise<ClaimedRun | null> {
  const { id } = candidate;
  if (!(await laneHasRoom(tx, candidate, taken))) return null;
  const rows = await tx.query(
    `UPDATE runs SET status = 'running', execution_seq = execution_seq + 1, lease_token = $2,
       version = version + 1, started_at = COALESCE(started_at, $3), updated_at = $3
     WHERE id = $1 AND status = 'waiting_for_capacity'${guard ? ` AND ${guard}` : ''} RETURNING *${withSegment ? SEGMENT_COLUMNS : ''}`,
    [id, newToken(), tx.now],
  );
  return rows.length ? claimedRunOf(rows[0]) : null;
}

/**
 * Whether a candidate's lane has room for one more claim (`taken`: what this claim took in each
 * lane so far, counted in): always for a run outside any lane; otherwise its lane is locked for
 * the rest of the unit ({@link laneOccupancy}) and counted, and a lane another claimer holds has none.
 */
async function laneHasRoom(tx: Tx, candidate: { function_id: string; concurrency_key: string | null; concurrency_limit: unknown }, taken: Map<string, number>): Promise<boolean> {
  if (candidate.concurrency_limit === null || candidate.concurrency_limit === undefined) return true;
  const lane = laneOf(candidate.function_id, candidate.concurrency_key);
  const occupancy = await laneOccupancy(tx, lane);
  if (occupancy === null) return false; // another claimer holds the lane: skip it this round
  const occupied = (taken.get(lane) ?? 0) + occupancy;
  if (occupied >= Number(candidate.concurrency_limit)) return false;
  taken.set(lane, (taken.get(lane) ?? 0) + 1);
  return true;
}

/**
 * PostgreSQL: claims the candidate runs `ids` (read and locked by this unit, none in a lane) in one
 * statement, each as {@link claimCandidate} claims one (execution bumped, its own new lease
 * token, with its segment's rows). Returns the claimed runs by id; a run no longer queued is left out.
 */
async function claimFreeCandidates(tx: Tx, ids: string[], newToken: () => string): Promise<Map<string, ClaimedRun>> {
  const claimed = new Map<string, ClaimedRun>();
  if (ids.length === 0) return claimed;
  const rows = await tx.query(
    `UPDATE runs SET status = 'running', execution_seq = execution_seq + 1, lease_token = c.token,
       version = version + 1, started_at = COALESCE(started_at, $3), updated_at = $3
       FROM unnest($1::text[], $2::text[]) AS c(id, token)
     WHERE runs.id = c.id AND runs.status = 'waiting_for_capacity' RETURNING runs.*${SEGMENT_COLUMNS}`,
    [ids, ids.map(() => newToken()), tx.now],
  );
  for (const row of rows) {
    const run = claimedRunOf(row);
    claimed.set(run.id, run);
  }
  return claimed;
}

/** How many batches a claim reads past runs of full lanes before it gives up for this round. */
const MAX_CLAIM_BATCHES = 5;

/** A lane: one function and one concurrency key (DESIGN.md "concurrency_lanes"). */
export function laneOf(functionId: string, concurrencyKey: string | null): string {
  return `${functionId}:${concurrencyKey ?? ''}`;
}

/**
 * A lane's occupancy: the count of its lease rows, or `null` when another claimer holds the lane.
 * On PostgreSQL the lane is locked for the rest of the claim first (a transaction-scoped advisory
 * lock, taken without waiting: a claim skips a lane another transaction holds, as it skips a
 * locked run row), so two claimers cannot both fill the last slot; on SQLite units of work
 * already run one at a time.
 */
async function laneOccupancy(tx: Tx, lane: string): Promise<number | null> {
  if (tx.dialect === 'postgres') {
    const [lock] = await tx.query<{ taken: unknown }>(`SELECT pg_try_advisory_xact_lock(hashtext($1)) AS taken`, [lane]);
    if (lock.taken !== true && lock.taken !== 't') return null;
  }
  const rows = await tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM leases WHERE lane = $1`, [lane]);
  return Number(rows[0].n);
}

/**
 * Where a segment boundary leaves a run: the state it moved to, or `null` when its guard failed
 * and nothing was written. `paused` when an operator had asked for a pause (DESIGN.md: `paused` at
 * a step boundary): the run parks instead, and `resume_status` keeps where a resume sends it.
 */
export type BoundaryStatus = 'waiting_for_capacity' | 'waiting' | 'paused';

/** The guard of a write by the live execution `run`: its id, `running`, its fence and version, from parameter `$first` on. */
function runningFence(run: RunRecord, first: number): { sql: string; params: unknown[] } {
  return {
    sql: `id = $${first} AND status = 'running' AND execution_seq = $${first + 1} AND lease_token = $${first + 2} AND version = $${first + 3}`,
    params: [run.id, run.executionSeq, run.leaseToken, run.version],
  };
}

/**
 * Moves a running execution back to the queue for its next attempt (retry backoff): status
 * `waiting_for_capacity` (or `paused` when a pause was requested), `attempt + 1`, available at
 * `availableAt`, the attempt's error kept. Fenced by execution and version.
 */
export async function requeueForRetry(tx: Tx, run: RunRecord, availableAt: number, error: unknown): Promise<BoundaryStatus | null> {
  const fence = runningFence(run, 4);
  const params = [availableAt, toJson(error), tx.now, ...fence.params];
  const queued = await tx.execute(
    `UPDATE runs SET status = 'waiting_for_capacity', attempt = attempt + 1, available_at = $1, error = $2,
       version = version + 1, updated_at = $3
     WHERE ${fence.sql} AND pause_requested = 0`,
    params,
  );
  if (queued.affected === 1) return 'waiting_for_capacity';
  const parked = await tx.execute(
    `UPDATE runs SET status = 'paused', resume_status = 'waiting_for_capacity', attempt = attempt + 1, available_at = $1, error = $2,
       version = version + 1, updated_at = $3
     WHERE ${fence.sql} AND pause_requested = 1`,
    params,
  );
  return parked.affected === 1 ? 'paused' : null;
}

/**
 * Fences off execution `executionSeq` after the engine ended it (a timeout): clears the run's lease
 * token while that execution is still the run's latest, so the worker's late report of it no longer
 * matches and is refused (`STALE_EXECUTION`, or `RUN_NOT_RUNNING` once the run ended) instead of
 * being taken for a repeat of the outcome. Call it in the unit of work that ended the execution.
 */
export async function fenceOffExecution(tx: Tx, runId: string, executionSeq: number): Promise<void> {
  await tx.execute(`UPDATE runs SET lease_token = NULL WHERE id = $1 AND execution_seq = $2`, [runId, executionSeq]);
}

/**
 * A running execution yields at a wait: status `waiting` (or `paused`), fenced like
 * `requeueForRetry`, and its lease row deleted (on PostgreSQL by the same statement). The caller
 * rolls its unit back when the fence fails (`null`).
 */
export async function markWaiting(tx: Tx, run: RunRecord): Promise<BoundaryStatus | null> {
  const fence = runningFence(run, 2);
  const params = [tx.now, ...fence.params];
  const lease = `DELETE FROM leases WHERE run_id = $2 AND execution_seq = $3`;
  if (tx.dialect !== 'postgres') await tx.execute(lease, params);
  const waiting = await tx.execute(
    `${tx.dialect === 'postgres' ? `WITH lease AS (${lease}) ` : ''}UPDATE runs SET status = 'waiting', version = version + 1, updated_at = $1 WHERE ${fence.sql} AND pause_requested = 0`,
    params,
  );
  if (waiting.affected === 1) return 'waiting';
  const parked = await tx.execute(
    `UPDATE runs SET status = 'paused', resume_status = 'waiting', version = version + 1, updated_at = $1 WHERE ${fence.sql} AND pause_requested = 1`,
    params,
  );
  return parked.affected === 1 ? 'paused' : null;
}

/**
 * Queues the next segment of a run: from `waiting` (a wake) or, with `fence`, directly from the
 * fenced running execution (an async invoke that needs no wait). Only from those states, so a
 * second wake changes nothing. A paused run whose wait was open stays `paused` and is marked to
 * be queued on resume; a running one with a pause requested parks. Returns where the run went,
 * or `null` when it was in none of those states.
 */
export async function queueContinuation(tx: Tx, runId: string, fence?: RunRecord): Promise<BoundaryStatus | null> {
  if (fence) {
    const guard = runningFence(fence, 2);
    const params = [tx.now, ...guard.params];
    const queued = await tx.execute(
      `UPDATE runs SET status = 'waiting_for_capacity', available_at = $1, version = version + 1, updated_at = $1 WHERE ${guard.sql} AND pause_requested = 0`,
      params,
    );
    if (queued.affected === 1) return 'waiting_for_capacity';
    const parked = await tx.execute(
      `UPDATE runs SET status = 'paused', resume_status = 'waiting_for_capacity', available_at = $1, version = version + 1, updated_at = $1
       WHERE ${guard.sql} AND pause_requested = 1`,
      params,
    );
    return parked.affected === 1 ? 'paused' : null;
  }
  const queued = await tx.execute(
    `UPDATE runs SET status = 'waiting_for_capacity', available_at = $2, version = version + 1, updated_at = $2
     WHERE id = $1 AND status = 'waiting'`,
    [runId, tx.now],
  );
  if (queued.affected === 1) return 'waiting_for_capacity';
  const kept = await tx.execute(
    `UPDATE runs SET resume_status = 'waiting_for_capacity', available_at = $2, version = version + 1, updated_at = $2
     WHERE id = $1 AND status = 'paused' AND resume_status = 'waiting'`,
    [runId, tx.now],
  );
  return kept.affected === 1 ? 'paused' : null;
}

/** Clears a child's `wake_pending` once its parent wake has been applied (or is moot). */
export async function clearWakePending(tx: Tx, runId: string): Promise<void> {
  await tx.execute(`UPDATE runs SET wake_pending = 0 WHERE id = $1 AND wake_pending = 1`, [runId]);
}

/** Ended children whose parent wake has not been applied, oldest first (partial index). */
export async function listWakePending(tx: Tx, limit: number): Promise<RunRecord[]> {
  const rows = await tx.query(`SELECT * FROM runs WHERE wake_pending = 1 ORDER BY ended_at, id LIMIT $1`, [limit]);
  return rows.map(mapRun);
}

/**
 * Admits a held run to the queue (its dispatch): only while it is still held and queued
 * (`waiting_for_capacity`, or paused before its first segment, which it then starts on resume),
 * so a second admission changes nothing. Returns whether it was released.
 */
export async function releaseHeld(tx: Tx, runId: string): Promise<boolean> {
  const r = await tx.execute(
    `UPDATE runs SET held = 0, available_at = $2, version = version + 1, updated_at = $2
     WHERE id = $1 AND held = 1 AND (status = 'waiting_for_capacity' OR (status = 'paused' AND resume_status = 'waiting_for_capacity'))`,
    [runId, tx.now],
  );
  return r.affected === 1;
}

/**
 * One page of held runs (an outcome clears `held`, so none has ended) created at or before `createdUpTo`, after the keyset cursor `after`
 * (`created_at`, `id`), oldest first (the orphan sweep; partial index `runs_held`).
 */
export async function pageHeldRuns(tx: Tx, createdUpTo: number, after: { createdAt: number; id: string } | null, limit: number): Promise<RunRecord[]> {
  const rows = after
    ? await tx.query(
      `SELECT * FROM runs WHERE held = 1 AND created_at <= $1
         AND (created_at > $2 OR (created_at = $2 AND id > $3)) ORDER BY created_at, id LIMIT $4`,
      [createdUpTo, after.createdAt, after.id, limit],
    )
    : await tx.query(
      `SELECT * FROM runs WHERE held = 1 AND created_at <= $1 ORDER BY created_at, id LIMIT $2`,
      [createdUpTo, limit],
    );
  return rows.map(mapRun);
}
