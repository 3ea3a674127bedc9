import { Statement } from '../sql';
import { Tx } from '../tx';

/** Whether the instance admits new work (`thawed`) or holds it until a thaw (`frozen`). */
export type AuthorityState = 'thawed' | 'frozen';

/** The instance authority row (migration `InstanceAuthority`). */
export interface AuthorityRecord {
  state: AuthorityState;
  /** Bumped by every freeze and thaw. */
  version: number;
  /** When the last transition committed (store clock, ms); `null` before the first. */
  changedAt: number | null;
  /** Who asked for the last transition; `null` when unknown. */
  changedBy: string | null;
  /** The reason given with the last transition; `null` without one. */
  reason: string | null;
}

function mapAuthority(row: Record<string, unknown>): AuthorityRecord {
  return {
    state: row.state === 'frozen' ? 'frozen' : 'thawed',
    version: Number(row.version),
    changedAt: row.changed_at === null || row.changed_at === undefined ? null : Number(row.changed_at),
    changedBy: row.changed_by === null || row.changed_by === undefined ? null : String(row.changed_by),
    reason: row.reason === null || row.reason === undefined ? null : String(row.reason),
  };
}

/** Reads the authority row without a lock (status reads). */
export async function readAuthority(tx: Tx): Promise<AuthorityRecord> {
  const rows = await tx.query(`SELECT * FROM instance_authority WHERE id = 1`);
  return mapAuthority(rows[0]);
}

/**
 * Whether the instance is frozen, read under a shared lock on PostgreSQL (`FOR SHARE`; SQLite runs
 * units one at a time): an open freeze or thaw holds the reader until it ends, and once read the
 * state cannot change before this unit of work ends. The caller's lock limit covers the wait.
 */
export async function isFrozen(tx: Tx): Promise<boolean> {
  return frozenIn(await tx.query(frozenRead(tx).sql));
}

/** {@link isFrozen}'s statement, to send with others (`Tx.queryTogether`); {@link frozenIn} reads its rows. */
export function frozenRead(tx: Tx): Statement {
  return { sql: `SELECT state FROM instance_authority WHERE id = 1${tx.dialect === 'postgres' ? ' FOR SHARE' : ''}`, params: [] };
}

/** Whether the rows of {@link frozenRead} say the instance is frozen. */
export function frozenIn(rows: Record<string, unknown>[]): boolean {
  return rows[0]?.state === 'frozen';
}

/**
 * A condition on the statement's `runs` row that holds while the instance is thawed, for a
 * claim's own statement: on PostgreSQL it reads the authority row `FOR SHARE`, as
 * {@link isFrozen} does (an open freeze holds the claim until it ends, after which the claim sees
 * the frozen state; once read, no freeze commits before the claim's unit of work ends), without a
 * statement of its own. It names the run row (`runs.held = 0`, which every claimable run meets),
 * so PostgreSQL evaluates it per candidate and a claim that finds no run locks nothing and takes
 * no transaction id. SQLite runs units one at a time.
 */
export function thawedForRun(tx: Tx): string {
  return `EXISTS (SELECT 1 FROM instance_authority WHERE id = 1 AND state <> 'frozen' AND runs.held = 0${tx.dialect === 'postgres' ? ' FOR SHARE' : ''})`;
}

/**
 * Moves the authority to `to` under the row's exclusive lock (`FOR UPDATE` on PostgreSQL), bumping
 * its version and stamping who and when. Returns the row as written, or `null` when it was already
 * in `to` (nothing written; the row stays locked until the unit ends).
 */
export async function transitionAuthority(tx: Tx, to: AuthorityState, by: string | null, reason: string | null): Promise<AuthorityRecord | null> {
  await tx.query(`SELECT id FROM instance_authority WHERE id = 1${tx.forUpdate}`);
  const rows = await tx.query(
    `UPDATE instance_authority SET state = $1, version = version + 1, changed_at = $2, changed_by = $3, reason = $4
     WHERE id = 1 AND state <> $1 RETURNING *`,
    [to, tx.now, by, reason],
  );
  return rows.length ? mapAuthority(rows[0]) : null;
}

/** Work a freeze holds back, counted by kind. */
export interface HeldWork {
  /** Segments queued and due (`waiting_for_capacity`, `available_at` passed, not held). */
  queued: number;
  /** Runs created and not yet admitted to the queue (`held`). */
  admissions: number;
  /** Sleeps whose wake time has passed. */
  sleeps: number;
  /** Ended children whose parent wake has not been applied. */
  wakes: number;
}

/** Counts the work waiting for admission now (`ironflow instance status`). */
export async function countHeldWork(tx: Tx): Promise<HeldWork> {
  const count = async (sql: string, params: unknown[] = []) => Number((await tx.query<{ n: unknown }>(sql, params))[0]?.n ?? 0);
  return {
    queued: await count(`SELECT COUNT(*) AS n FROM runs WHERE status = 'waiting_for_capacity' AND held = 0 AND available_at <= $1`, [tx.now]),
    admissions: await count(`SELECT COUNT(*) AS n FROM runs WHERE held = 1`),
    sleeps: await count(`SELECT COUNT(*) AS n FROM steps WHERE type = 'sleep' AND status = 'waiting' AND wake_at <= $1`, [tx.now]),
    wakes: await count(`SELECT COUNT(*) AS n FROM runs WHERE wake_pending = 1`),
  };
}
