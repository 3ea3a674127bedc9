import { Mutex } from 'async-mutex';
import { EngineError } from '@ironflow/contracts';
import { DataSource, QueryRunner } from 'typeorm';
import { StoreClock } from './clock';
import { Dialect, toPositional } from './sql';
import { Store, Tx, UnitOptions } from './tx';
import { DEFAULT_LOCK_LIMIT_MS, LockTimeoutError, isLockTimeout } from './lock-limit';
import { PreparedStatementNames, isStalePreparedStatement } from './prepared-statements';
import { InitialSchema1732900000000 } from './migrations/initial-schema';
import { ConcurrencyLanes1733000000000 } from './migrations/concurrency-lanes';
import { WaitingRunsIndex1733100000000 } from './migrations/waiting-runs-index';
import { EventVersionMetadata1734100000000 } from './migrations/event-version-metadata';
import { LeaseDeadline1734100000001 } from './migrations/lease-deadline';
import { LeaseClockOffset1734100000002 } from './migrations/lease-clock-offset';
import { CronAndDebounce1734200000000 } from './migrations/cron-and-debounce';
import { ApiKeysAndSecrets1734300000000 } from './migrations/api-keys-and-secrets';
import { PauseAndTopics1734400000000 } from './migrations/pause-and-topics';
import { EventsListingIndex1734500000000 } from './migrations/events-listing-index';
import { CancelOnAndInvokes1734600000000 } from './migrations/cancel-on-and-invokes';
import { InstanceAuthority1734700000000 } from './migrations/instance-authority';
import { StepStartedAt1734700000007 } from './migrations/step-started-at';
import { AuditWriteFates1734800000000 } from './migrations/audit-write-fates';
import { RunCreatedOnce1734900000000 } from './migrations/run-created-once';
import { PassCursors1734900000001 } from './migrations/pass-cursors';

const MIGRATIONS = [
  InitialSchema1732900000000,
  ConcurrencyLanes1733000000000,
  WaitingRunsIndex1733100000000,
  EventVersionMetadata1734100000000,
  LeaseDeadline1734100000001,
  LeaseClockOffset1734100000002,
  CronAndDebounce1734200000000,
  ApiKeysAndSecrets1734300000000,
  PauseAndTopics1734400000000,
  EventsListingIndex1734500000000,
  CancelOnAndInvokes1734600000000,
  InstanceAuthority1734700000000,
  StepStartedAt1734700000007,
  AuditWriteFates1734800000000,
  RunCreatedOnce1734900000000,
  PassCursors1734900000001,
];

export interface StoreOptions {
  /** `postgres://…` for PostgreSQL; `sqlite:<path>` or a path ending in `.db` for SQLite; `sqlite::memory:` for tests. */
  url: string;
  /** PostgreSQL pool size (default 10). */
  poolSize?: number;
  /** PostgreSQL schema to use (created if missing); tests give each suite its own. */
  schema?: string;
  /** Resync period of the store clock, ms (default 30000). */
  clockResyncMs?: number;
  /**
   * PostgreSQL: the lock limit every runtime connection carries, ms (`lock_timeout` as a connection
   * parameter; default {@link DEFAULT_LOCK_LIMIT_MS}, 1000, the specification's 1 s; 0 for none). A
   * statement of a read, of a one-statement unit or of a unit of work without a limit of its own
   * (`UnitOptions.lockLimitMs`, `unitWithLockLimit`, `Tx.setLockTimeout`) gives up on a row, table
   * or advisory lock held longer, and its unit rejects with `LockTimeoutError` (retryable, nothing
   * changed). The migrations run on connections of their own without it: a `CREATE INDEX` waits for
   * its locks. Throws `VALIDATION_ERROR` unless a whole number ≥ 0.
   */
  lockTimeoutMs?: number;
  /**
   * SQLite only: hold the database file exclusively for this process (`locking_mode = EXCLUSIVE`),
   * so a second process on the same file fails at start instead of fighting over the lock.
   */
  exclusive?: boolean;
}

export interface OpenedStore {
  store: Store;
  clock: StoreClock;
}

/**
 * Opens the store named by `url`, runs its migrations and measures the store clock.
 * Throws when the database cannot be reached or a migration fails; `VALIDATION_ERROR` for a bad
 * `lockTimeoutMs`.
 */
export async function openStore(options: StoreOptions): Promise<OpenedStore> {
  const dialect: Dialect = options.url.startsWith('postgres') ? 'postgres' : 'sqlite';
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_LIMIT_MS;
  if (!Number.isSafeInteger(lockTimeoutMs) || lockTimeoutMs < 0) {
    throw new EngineError('VALIDATION_ERROR', `lockTimeoutMs must be a whole number of ms, 0 or more (got ${String(options.lockTimeoutMs)})`, { field: 'lockTimeoutMs' });
  }
  const clock = new StoreClock();
  const dataSource = dialect === 'postgres' ? await openPostgres(options, lockTimeoutMs) : await openSqlite(options);
  const store = new TypeormStore(dataSource, dialect, clock, dialect === 'postgres' && lockTimeoutMs > 0 ? lockTimeoutMs : null);
  await store.syncClock();
  store.startClockResync(options.clockResyncMs ?? 30_000);
  return { store, clock };
}

/** The `-c` connection parameters of a PostgreSQL connection: the schema, and the lock limit when given. */
function connectionParameters(options: StoreOptions, lockTimeoutMs?: number): { options?: string } {
  const parameters = [
    ...(options.schema ? [`-c search_path="${options.schema}"`] : []),
    ...(lockTimeoutMs ? [`-c lock_timeout=${lockTimeoutMs}`] : []),
  ];
  return parameters.length > 0 ? { options: parameters.join(' ') } : {};
}

/** The runtime pool, its connections carrying the lock limit `lockTimeoutMs` (0: none), after the migrations. */
async function openPostgres(options: StoreOptions, lockTimeoutMs: number): Promise<DataSource> {
  await migratePostgres(options);
  const ds = new DataSource({
    type: 'postgres',
    url: options.url,
    schema: options.schema,
    // `idleTimeoutMillis: 0`: an idle connection stays open (pg-pool closes one after 10 s idle by
    // default), so a burst after a quiet spell does not start a new backend per connection, each
    // paying its start and cold catalog caches and preparing its statements again (issue 11). The
    // pool stays bounded by `max`; a connection that breaks is dropped and replaced on demand.
    extra: { max: options.poolSize ?? 10, idleTimeoutMillis: 0, ...connectionParameters(options, lockTimeoutMs) },
  });
  await ds.initialize();
  return ds;
}

/**
 * Creates the schema (when given) and runs the migrations on a short-lived pool of two
 * connections (the advisory lock's and the migrations'), without the runtime's lock limit: a
 * migration's `CREATE INDEX` or `ALTER TABLE` waits for its locks as long as it takes. Several
 * services start at once on one database: one runs the migrations, the others wait for it.
 */
async function migratePostgres(options: StoreOptions): Promise<void> {
  const ds = new DataSource({
    type: 'postgres',
    url: options.url,
    schema: options.schema,
    extra: { max: 2, ...connectionParameters(options) },
    migrations: MIGRATIONS,
    migrationsTableName: 'ironflow_migrations',
  });
  await ds.initialize();
  try {
    if (options.schema) await ds.query(`CREATE SCHEMA IF NOT EXISTS "${options.schema}"`);
    const runner = ds.createQueryRunner();
    await runner.connect();
    try {
      await runner.query(`SELECT pg_advisory_lock(hashtext('ironflow_migrations'))`);
      await ds.runMigrations({ transaction: 'each' });
    } finally {
      await runner.query(`SELECT pg_advisory_unlock(hashtext('ironflow_migrations'))`).catch(() => undefined);
      await runner.release();
    }
  } finally {
    await ds.destroy();
  }
}

async function openSqlite(options: StoreOptions): Promise<DataSource> {
  const path = options.url.replace(/^sqlite:/, '');
  const ds = new DataSource({
    type: 'better-sqlite3',
    database: path === '' ? ':memory:' : path,
    migrations: MIGRATIONS,
    migrationsTableName: 'ironflow_migrations',
    prepareDatabase: (db: { pragma(s: string): unknown }) => {
      if (options.exclusive) db.pragma('locking_mode = EXCLUSIVE');
      db.pragma('journal_mode = WAL');
      db.pragma(`busy_timeout = ${options.exclusive ? 500 : 5000}`);
      db.pragma('foreign_keys = OFF');
    },
  });
  await ds.initialize();
  await ds.runMigrations({ transaction: 'each' });
  return ds;
}

/**
 * A PostgreSQL unit of work whose BEGIN is sent with its first statement, together with its lock
 * limit (`SET LOCAL lock_timeout`) when it has one.
 */
interface LazyBegin {
  begun: boolean;
  /** The unit's own lock limit, ms (undefined: the connection's default). */
  lockLimitMs?: number;
}

class TypeormStore implements Store {
  /** TypeORM shares one connection on SQLite: units of work there run one at a time. */
  private readonly sqliteMutex = new Mutex();
  private resyncTimer?: NodeJS.Timeout;
  /** PostgreSQL: the statement texts that run as named prepared statements (issue 11). */
  readonly preparedStatements = new PreparedStatementNames();

  constructor(
    private readonly dataSource: DataSource,
    readonly dialect: Dialect,
    private readonly clock: StoreClock,
    /** PostgreSQL: the lock limit its connections carry, ms (`StoreOptions.lockTimeoutMs`); null for none. */
    private readonly lockTimeoutMs: number | null,
  ) {}

  async syncClock(): Promise<void> {
    if (this.dialect === 'sqlite') return; // the embedded store's clock is this process's clock
    const before = Date.now();
    const rows: { now: string }[] = await this.dataSource.query(
      `SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS now`,
    );
    const after = Date.now();
    this.clock.setOffset(Number(rows[0].now) - Math.round((before + after) / 2));
  }

  startClockResync(periodMs: number): void {
    if (this.dialect === 'sqlite') return;
    this.resyncTimer = setInterval(() => void this.syncClock().catch(() => undefined), periodMs);
    this.resyncTimer.unref();
  }

  unitOfWork<T>(name: string, work: (tx: Tx) => Promise<T>, options: UnitOptions = {}): Promise<T> {
    if (this.dialect === 'sqlite') return this.run(name, work, true);
    const { oneStatement: single, lockLimitMs } = options;
    // A one-statement unit needs a transaction only to hold a lock limit other than its connection's.
    if (single && (lockLimitMs === undefined || lockLimitMs === this.lockTimeoutMs)) return this.run(name, oneStatement(name, work), false);
    return this.run(name, single ? oneStatement(name, work) : work, true, lockLimitMs);
  }

  read<T>(name: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.run(name, work, false);
  }

  private async run<T>(name: string, work: (tx: Tx) => Promise<T>, transactional: boolean, lockLimitMs?: number): Promise<T> {
    if (this.dialect === 'sqlite') {
      return this.sqliteMutex.runExclusive(() => this.runOn(name, work, transactional));
    }
    return this.runOn(name, work, transactional, lockLimitMs);
  }

  private async runOn<T>(name: string, work: (tx: Tx) => Promise<T>, transactional: boolean, lockLimitMs?: number): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    // PostgreSQL: the transaction begins with the unit's first statement (`begin`), in the same
    // round trip as its lock limit; a unit that ran no statement sends neither BEGIN nor COMMIT
    // (issue 11). SQLite keeps TypeORM's transaction handling.
    const lazy: LazyBegin | undefined = transactional && this.dialect === 'postgres' ? { begun: false, lockLimitMs } : undefined;
    let stale: unknown;
    try {
      if (transactional && !lazy) await runner.startTransaction();
      try {
        const result = await work(this.txOn(runner, lazy));
        if (lazy) {
          if (lazy.begun) await runner.query('COMMIT');
        } else if (transactional) {
          await runner.commitTransaction();
        }
        return result;
      } catch (err) {
        if (this.dialect === 'postgres' && isStalePreparedStatement(err)) stale = err;
        if (lazy?.begun) await runner.query('ROLLBACK');
        else if (transactional && runner.isTransactionActive) await runner.rollbackTransaction();
        if (this.dialect === 'postgres' && isLockTimeout(err)) throw new LockTimeoutError(name, lazy?.lockLimitMs ?? this.lockTimeoutMs, err);
        throw this.dialect === 'postgres' ? unstorableValue(err) ?? err : err;
      }
    } finally {
      // A connection whose prepared statement went stale is closed, not reused: the next one prepares afresh.
      if (stale !== undefined) await (runner as QueryRunner & { releasePostgresConnection(err?: unknown): Promise<void> }).releasePostgresConnection(stale);
      else await runner.release();
    }
  }

  private txOn(runner: QueryRunner, lazy?: LazyBegin): Tx {
    const dialect = this.dialect;
    const lockLimit = (ms: number) => `SET LOCAL lock_timeout = '${Math.max(1, Math.floor(ms))}ms'`;
    /** Sends BEGIN, with the unit's lock limit when it has one, unless the transaction has begun. */
    const begin = async (): Promise<void> => {
      if (!lazy || lazy.begun) return;
      lazy.begun = true;
      await runner.query(lazy.lockLimitMs === undefined ? 'START TRANSACTION' : `START TRANSACTION; ${lockLimit(lazy.lockLimitMs)}`);
    };
    const execute = async <R>(sql: string, params: readonly unknown[] = []) => {
      await begin();
      const statement = dialect === 'sqlite' ? toPositional(sql, params) : { sql, params: [...params] };
      // A named statement goes through TypeORM as the `pg` query config `{ name, text }` (its values passed beside it).
      const name = dialect === 'postgres' ? this.preparedStatements.nameOf(sql, params.length) : undefined;
      const text = name === undefined ? statement.sql : ({ name, text: statement.sql } as unknown as string);
      const result = await runner.query(text, statement.params, true);
      const rows = (Array.isArray(result.records) ? result.records : []) as R[];
      return { rows, affected: result.affected ?? rows.length };
    };
    return {
      dialect,
      now: this.clock.now(),
      forUpdate: dialect === 'postgres' ? ' FOR UPDATE' : '',
      forUpdateSkipLocked: dialect === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '',
      execute,
      query: async <R>(sql: string, params?: readonly unknown[]) => (await execute<R>(sql, params)).rows,
      setLockTimeout: async (ms: number) => {
        if (dialect !== 'postgres') return;
        if (!lazy) throw new Error('setLockTimeout: a read runs without a transaction and holds no lock limit of its own');
        // Before the first statement the limit goes with the BEGIN; after it, on its own.
        const begun = lazy.begun;
        lazy.lockLimitMs = ms;
        if (begun) await runner.query(lockLimit(ms));
      },
    };
  }

  async close(): Promise<void> {
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    // Wait for units of work already running on SQLite before closing its one connection.
    if (this.dialect === 'sqlite') await this.sqliteMutex.waitForUnlock();
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}

/** `work` on a Tx that refuses a second statement (a unit of work run without a transaction). */
function oneStatement<T>(name: string, work: (tx: Tx) => Promise<T>): (tx: Tx) => Promise<T> {
  return (tx) => {
    let ran = false;
    const once = (): void => {
      if (ran) throw new Error(`unit of work ${name} runs without a transaction and may run one statement only`);
      ran = true;
    };
    return work({
      ...tx,
      query: (sql, params) => (once(), tx.query(sql, params)),
      execute: (sql, params) => (once(), tx.execute(sql, params)),
      setLockTimeout: async () => {
        throw new Error(`unit of work ${name} runs one statement: its lock limit is UnitOptions.lockLimitMs`);
      },
    });
  };
}

/**
 * A PostgreSQL "data exception" (SQLSTATE class 22: U+0000 in text, a number past BIGINT, …) means
 * the request carried a value the store cannot hold, not that the store failed: it becomes a
 * `VALIDATION_ERROR` (400 at the edge; a report's attempt then fails with a code instead of
 * leaving its run running). The unit of work is already rolled back. Other errors are unchanged.
 */
function unstorableValue(err: unknown): EngineError | undefined {
  const code = (err as { driverError?: { code?: unknown }; code?: unknown } | null)?.driverError?.code ?? (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('22')) return undefined;
  return new EngineError('VALIDATION_ERROR', `the store cannot hold a value of this request: ${(err as Error).message}`, { sqlstate: code });
}
