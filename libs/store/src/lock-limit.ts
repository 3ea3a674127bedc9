import { EngineError } from '@ironflow/contracts';
import { Store, Tx, UnitOptions } from './tx';

/**
 * The lock limit of the specification ("Each wait for a lock … has a 1 s limit on PostgreSQL"),
 * ms: the default of the engine's `lockLimitMs` and of the lock limit every PostgreSQL runtime
 * connection carries (`StoreOptions.lockTimeoutMs`).
 */
export const DEFAULT_LOCK_LIMIT_MS = 1000;

/** PostgreSQL's SQLSTATE for a lock wait that reached `lock_timeout` (`lock_not_available`). */
export const LOCK_NOT_AVAILABLE = '55P03';

/**
 * A unit of work gave up waiting for a row, table or advisory lock at its limit (specification,
 * "Each wait for a lock … has a 1 s limit on PostgreSQL"). Retryable: the unit rolled back, so
 * nothing it would have written is stored and its run is exactly as it was; a later pass (or the
 * caller's retry) finishes the work once the lock clears. At an API edge it answers `UNAVAILABLE`
 * (503: retry). `details`: `{ sqlstate: '55P03', unit, limitMs }`.
 */
export class LockTimeoutError extends EngineError {
  readonly retryable = true;
  constructor(readonly unit: string, readonly limitMs: number | null, cause?: unknown) {
    super('UNAVAILABLE', `${unit} gave up waiting for a lock${limitMs === null ? '' : ` after ${limitMs} ms`}; nothing changed, retry later`, {
      sqlstate: LOCK_NOT_AVAILABLE,
      unit,
      limitMs,
    });
    this.name = 'LockTimeoutError';
    if (cause !== undefined) (this as { cause?: unknown }).cause = cause;
  }
}

/** Whether `err` is a lock wait that reached its limit (a `LockTimeoutError`, or PostgreSQL's 55P03 not yet mapped). */
export function isLockTimeout(err: unknown): boolean {
  if (err instanceof LockTimeoutError) return true;
  const e = err as { driverError?: { code?: unknown }; code?: unknown } | null;
  return (e?.driverError?.code ?? e?.code) === LOCK_NOT_AVAILABLE;
}

/**
 * The one way a use-case transaction bounds its lock waits: runs `work` as the unit of work `name`
 * with every lock wait inside it limited to `limitMs` (PostgreSQL `SET LOCAL lock_timeout`, sent
 * with the unit's BEGIN, which covers row locks, `FOR UPDATE`, table locks such as a
 * `CREATE INDEX`'s, and advisory locks). A wait past the limit rolls the whole unit back and
 * rejects with `LockTimeoutError` (retryable: nothing changed). Other errors pass through
 * unchanged. With `options.oneStatement` (work that runs one statement, atomic on its own) the
 * unit runs without BEGIN and COMMIT, one round trip (issue 11): at the connection's lock limit
 * (`StoreOptions.lockTimeoutMs`, 1000 ms by default) as it is, with another limit after its
 * `SET LOCAL` in the same simple query (`UnitOptions.lockLimitMs`).
 *
 * SQLite has no row locks and runs units of work one at a time, so there the limit is a no-op and
 * `work` runs as a plain unit of work (its `busy_timeout` still bounds a file lock).
 *
 * Pair it with `tx.forUpdateSkipLocked` where a pass can skip a row instead of waiting for it.
 */
export async function unitWithLockLimit<T>(store: Store, name: string, limitMs: number, work: (tx: Tx) => Promise<T>, options: Omit<UnitOptions, 'lockLimitMs'> = {}): Promise<T> {
  try {
    return await store.unitOfWork(name, work, { ...options, lockLimitMs: limitMs });
  } catch (err) {
    if (err instanceof LockTimeoutError) throw err.limitMs === null ? new LockTimeoutError(name, limitMs, err.cause ?? err) : err;
    if (isLockTimeout(err)) throw new LockTimeoutError(name, limitMs, err);
    throw err;
  }
}

/**
 * Runs `write` inside a savepoint of `tx`, for a write the unit can go on without: a lock wait
 * that reaches the unit's limit (`unitWithLockLimit`) rolls back only the savepoint and resolves
 * `false`, and the rest of the unit still commits; otherwise resolves `true`. Any other error
 * rolls back the savepoint and is rethrown. On SQLite (no row locks) the write never waits.
 */
export async function unlessLocked(tx: Tx, write: () => Promise<unknown>): Promise<boolean> {
  await tx.query('SAVEPOINT unless_locked');
  try {
    await write();
    await tx.query('RELEASE SAVEPOINT unless_locked');
    return true;
  } catch (err) {
    await tx.query('ROLLBACK TO SAVEPOINT unless_locked');
    if (isLockTimeout(err)) return false;
    throw err;
  }
}
