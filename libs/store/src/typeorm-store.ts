import { Mutex } from 'async-mutex';
import type { Pool } from 'pg';
import { EngineError } from '@ironflow/contracts';
import { DataSource, QueryRunner } from 'typeorm';
import { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import { StoreClock } from './clock';
import { Dialect, oneAfterAnother, toPositional } from './sql';
import { Store, Tx, UnitOptions } from './tx';
import { DEFAULT_LOCK_LIMIT_MS } from './lock-limit';
import { PostgresUnits } from './postgres-unit';
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
  /**
   * True when this process holds the database alone: SQLite opened with `exclusive`, whose file no
   * other process can open while this one has it. False otherwise, PostgreSQL always (`exclusive`
   * does not apply there: other nodes may share the database).
   */
  exclusive: boolean;
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
  return { store, clock, exclusive: dialect === 'sqlite' && options.exclusive === true };
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
    prepareDatabase: (db: { pragma(s: string): unknown; exec(sql: string): unknown; close(): unknown }) => {
      try {
        // The file-lock wait first: switching to WAL is the first pragma to take the lock.
        db.pragma(`busy_timeout = ${options.exclusive ? 500 : 5000}`);
        if (options.exclusive) db.pragma('locking_mode = EXCLUSIVE');
        db.pragma('journal_mode = WAL');
        db.pragma('foreign_keys = OFF');
        // EXCLUSIVE locking keeps a lock once taken, but a shared one until the first write: the
        // exclusive lock is taken here, whether or not opening writes (migrations), and kept.
        if (options.exclusive) db.exec('BEGIN EXCLUSIVE; COMMIT');
      } catch (err) {
        // TypeORM drops the connection it was preparing: closed here, or its file stays open (and
        // SQLite's lock state for the file's inode with it, which a later file reusing the inode meets).
        db.close();
        throw err;
      }
    },
  });
  await ds.initialize();
  try {
    await ds.runMigrations({ transaction: 'each' });
  } catch (err) {
    await ds.destroy();
    throw err;
  }
  return ds;
}

/**
 * The store on TypeORM's DataSource: SQLite's units of work run on its query runner, one at a time;
 * PostgreSQL's on the DataSource's `pg` pool directly ({@link PostgresUnits}).
 */
class TypeormStore implements Store {
  /** TypeORM shares one connection on SQLite: units of work there run one at a time. */
  private readonly sqliteMutex = new Mutex();
  private resyncTimer?: NodeJS.Timeout;
  /** PostgreSQL: the units of work on the pool's clients. */
  private readonly postgres?: PostgresUnits;

  constructor(
    private readonly dataSource: DataSource,
    readonly dialect: Dialect,
    private readonly clock: StoreClock,
    /** PostgreSQL: the lock limit its connections carry, ms (`StoreOptions.lockTimeoutMs`); null for none. */
    lockTimeoutMs: number | null,
  ) {
    if (dialect === 'postgres') this.postgres = new PostgresUnits((dataSource.driver as PostgresDriver).master as Pool, clock, lockTimeoutMs);
  }

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
    if (this.postgres) return this.postgres.unitOfWork(name, work, options);
    return this.sqliteMutex.runExclusive(() => this.runOnSqlite(work, true));
  }

  read<T>(name: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    if (this.postgres) return this.postgres.read(name, work);
    return this.sqliteMutex.runExclusive(() => this.runOnSqlite(work, false));
  }

  private async runOnSqlite<T>(work: (tx: Tx) => Promise<T>, transactional: boolean): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      if (transactional) await runner.startTransaction();
      try {
        const result = await work(this.sqliteTx(runner));
        if (transactional) await runner.commitTransaction();
        return result;
      } catch (err) {
        if (transactional && runner.isTransactionActive) await runner.rollbackTransaction();
        throw err;
      }
    } finally {
      await runner.release();
    }
  }

  private sqliteTx(runner: QueryRunner): Tx {
    const execute = async <R>(sql: string, params: readonly unknown[] = []) => {
      const statement = toPositional(sql, params);
      const result = await runner.query(statement.sql, statement.params, true);
      const rows = (Array.isArray(result.records) ? result.records : []) as R[];
      return { rows, affected: result.affected ?? rows.length };
    };
    return {
      dialect: 'sqlite',
      now: this.clock.now(),
      forUpdate: '',
      forUpdateSkipLocked: '',
      execute,
      query: async <R>(sql: string, params?: readonly unknown[]) => (await execute<R>(sql, params)).rows,
      queryTogether: (statements) => oneAfterAnother(execute, statements),
      // SQLite has no row locks and runs units one at a time: nothing to bound.
      setLockTimeout: async () => undefined,
    };
  }

  async close(): Promise<void> {
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    // Wait for units of work already running on SQLite before closing its one connection.
    if (this.dialect === 'sqlite') await this.sqliteMutex.waitForUnlock();
    this.postgres?.close();
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}
