import { Dialect, Statement } from './sql';

/**
 * One unit of work's view of the store: every statement runs in the same transaction, and `now`
 * is the store clock read once when the unit began (ms since the epoch).
 */
export interface Tx {
  readonly dialect: Dialect;
  readonly now: number;
  /** Runs a statement and returns its rows (`RETURNING` rows for writes). */
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** Runs a write and returns its rows and the number of rows it changed. */
  execute<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<{ rows: R[]; affected: number }>;
  /**
   * Runs `statements` in their order and returns each one's rows, for statements the unit needs
   * no result of before the last is sent (issue 11): on PostgreSQL they go in one round trip when
   * their parameters can be written as literals (`inlineParameters`; with the unit's BEGIN when
   * they are its first), else one after another. A statement that fails ends the unit (the ones
   * after it do not run). On SQLite, one after another.
   */
  queryTogether(statements: readonly Statement[]): Promise<Record<string, unknown>[][]>;
  /** ` FOR UPDATE` on PostgreSQL; empty on SQLite, where units of work already run one at a time. */
  readonly forUpdate: string;
  /** ` FOR UPDATE SKIP LOCKED` on PostgreSQL; empty on SQLite. */
  readonly forUpdateSkipLocked: string;
  /**
   * Bounds how long this unit of work waits for any row lock (PostgreSQL `SET LOCAL lock_timeout`;
   * nothing on SQLite, where units run one at a time), in place of the connection's default
   * (`StoreOptions.lockTimeoutMs`, 1000 ms). A wait past it throws, and the unit rolls back. Setting
   * the limit the unit already has sends nothing.
   */
  setLockTimeout(ms: number): Promise<void>;
}

/** How a unit of work runs. */
export interface UnitOptions {
  /**
   * The work runs one statement on PostgreSQL, atomic on its own (e.g. a data-modifying CTE): it
   * is sent without BEGIN and COMMIT, two round trips fewer (issue 11), its lock waits bounded by
   * the connection's default (`StoreOptions.lockTimeoutMs`); a second statement throws and the
   * first stays committed, so only work that runs one statement may set it. Ignored on SQLite,
   * where the unit runs in a transaction as usual. Default false.
   */
  oneStatement?: boolean;
  /**
   * PostgreSQL: every lock wait of the unit ends at this many ms (`SET LOCAL lock_timeout`, sent
   * with its BEGIN) instead of the connection's default; past it the unit rolls back with
   * `LockTimeoutError`. A `oneStatement` unit with another limit than the connection's sends its
   * statement after its `SET LOCAL` in one simple query, which PostgreSQL runs as one implicit
   * transaction (still one round trip, no BEGIN or COMMIT; the statement's parameters are written
   * into it as literals, and one that cannot be begins a transaction instead). Nothing on SQLite.
   * Default: the connection's default (`StoreOptions.lockTimeoutMs`).
   */
  lockLimitMs?: number;
}

/**
 * The store port: use-case transactions. `unitOfWork` runs `work` in one transaction, commits when
 * it resolves and rolls back when it throws (rethrowing). On SQLite units run one at a time.
 */
export interface Store {
  readonly dialect: Dialect;
  unitOfWork<T>(name: string, work: (tx: Tx) => Promise<T>, options?: UnitOptions): Promise<T>;
  /** Reads without a transaction (`BEGIN` is skipped); for API reads. */
  read<T>(name: string, work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Closes the store once the units of work running have finished. On PostgreSQL a unit or read
   * still waiting for a connection of the pool, or begun after, rejects at once (an `Error` naming
   * it) rather than waiting for a pool that ended.
   */
  close(): Promise<void>;
}
