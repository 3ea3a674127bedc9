import type { Pool, PoolClient, QueryResult } from 'pg';
import { EngineError } from '@ironflow/contracts';
import { StoreClock } from './clock';
import { Tx, UnitOptions } from './tx';
import { LockTimeoutError, isLockTimeout } from './lock-limit';
import { PreparedStatementNames, isStalePreparedStatement } from './prepared-statements';
import { oneAfterAnother } from './sql';
import { inlineParameters } from './inline-parameters';

/**
 * A transactional unit: its BEGIN is sent when its first statement is, with its own lock limit when
 * it has one, in the same round trip when that statement can go as a simple query (no parameters,
 * or parameters written into it: {@link inlineParameters}).
 */
interface LazyBegin {
  begun: boolean;
  /** The unit's own lock limit, ms (undefined: the connection's). */
  lockLimitMs?: number;
  /**
   * A one-statement unit with its own lock limit: its statement, as a simple query, goes after a
   * `SET LOCAL lock_timeout` in the same text, which PostgreSQL runs as one implicit transaction (no
   * BEGIN, no COMMIT). A statement that cannot go as a simple query begins a transaction instead.
   */
  implicit?: boolean;
}

/**
 * PostgreSQL units of work and reads, run straight on the clients of the `pg` pool (issue 11:
 * TypeORM's query runner, with its events, logger and result objects on every statement, cost
 * the dispatcher a few % of its CPU; TypeORM keeps the pool, the migrations and SQLite). A
 * transactional unit's BEGIN is sent with its first statement, in one round trip with the unit's
 * lock limit (`SET LOCAL lock_timeout`) and with that statement too when it can go as a simple
 * query: without parameters (the instance authority's `FOR SHARE` read that begins a wake or an
 * admission) or with its parameters written into it as literals ({@link inlineParameters}: the run
 * read `FOR UPDATE` that begins a report); a unit that runs no statement sends neither BEGIN nor
 * COMMIT. A one-statement unit runs without BEGIN and COMMIT: at the connection's lock limit as it
 * is, with a limit of its own as one simple query after its `SET LOCAL` (one implicit transaction,
 * one round trip: an audit-writer's insert). A statement with parameters runs as a named prepared statement once its text is known
 * ({@link PreparedStatementNames}). Errors: a lock wait past the limit rejects with
 * `LockTimeoutError` (the unit's limit, else `lockTimeoutMs`, the connections' own); a data
 * exception (SQLSTATE class 22) with `VALIDATION_ERROR`; others as the driver raised them. The
 * unit is rolled back first. A connection whose prepared statement went stale, whose ROLLBACK
 * failed or that broke while the unit held it is closed, not given back to the pool.
 */
export class PostgresUnits {
  /** The statement texts that run as named prepared statements. */
  readonly preparedStatements = new PreparedStatementNames();
  private closed = false;
  /** Resolves at {@link close}: ends the waits for a connection. */
  private readonly closing: Promise<void>;
  private endWaits!: () => void;

  constructor(
    private readonly pool: Pool,
    private readonly clock: StoreClock,
    /** The lock limit the pool's connections carry, ms (`StoreOptions.lockTimeoutMs`); null for none. */
    private readonly lockTimeoutMs: number | null,
  ) {
    this.closing = new Promise((resolve) => (this.endWaits = resolve));
  }

  /**
   * Before the pool ends: the units still waiting for a connection, and any later one, reject
   * (pg-pool's `end()` never answers a `connect()` it queued: such a unit would wait forever).
   * Units holding a connection run on; `pool.end()` waits for them.
   */
  close(): void {
    this.closed = true;
    this.endWaits();
  }

  /**
   * `Store.unitOfWork` on PostgreSQL: in a transaction; a `oneStatement` unit without one, at the
   * connections' lock limit or, with its own, in the implicit transaction of one simple query.
   */
  unitOfWork<T>(name: string, work: (tx: Tx) => Promise<T>, { oneStatement: single, lockLimitMs }: UnitOptions = {}): Promise<T> {
    const ownLimit = lockLimitMs !== undefined && lockLimitMs !== this.lockTimeoutMs;
    if (single && !ownLimit) return this.run(name, oneStatement(name, work));
    return this.run(name, single ? oneStatement(name, work) : work, { begun: false, lockLimitMs, implicit: single });
  }

  /** `Store.read` on PostgreSQL: its statements run without a transaction. */
  read<T>(name: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.run(name, work);
  }

  private async run<T>(name: string, work: (tx: Tx) => Promise<T>, lazy?: LazyBegin): Promise<T> {
    const client = await this.connect(name);
    // The connection breaking while the unit holds it (the server went away) rejects the statement
    // under way; the listener keeps the client's 'error' event from going unhandled meanwhile.
    let discard: unknown;
    const onError = (err: Error) => (discard ??= err);
    client.on('error', onError);
    try {
      const result = await work(this.txOn(client, lazy));
      if (lazy?.begun) await client.query('COMMIT');
      return result;
    } catch (err) {
      if (isStalePreparedStatement(err)) discard ??= err;
      if (lazy?.begun) await client.query('ROLLBACK').catch((rollback: unknown) => (discard ??= rollback));
      if (isLockTimeout(err)) throw new LockTimeoutError(name, lazy?.lockLimitMs ?? this.lockTimeoutMs, err);
      throw unstorableValue(err) ?? err;
    } finally {
      client.removeListener('error', onError);
      // With an error, pg-pool closes the connection instead of reusing it: the next one prepares afresh.
      client.release(discard === undefined ? undefined : discard instanceof Error ? discard : new Error(String(discard)));
    }
  }

  /** A connection of the pool for unit `name`; rejects once the store closed ({@link close}). */
  private async connect(name: string): Promise<PoolClient> {
    const refused = () => new Error(`the store is closed: ${name} got no connection`);
    if (this.closed) throw refused();
    const connecting = this.pool.connect();
    const client = await Promise.race([connecting, this.closing]);
    if (client) return client;
    // A connection that still comes goes back to the ending pool, which closes it.
    connecting.then((late) => late.release(), () => undefined);
    throw refused();
  }

  private txOn(client: PoolClient, lazy?: LazyBegin): Tx {
    const lockLimit = (ms: number) => `SET LOCAL lock_timeout = '${Math.max(1, Math.floor(ms))}ms'`;
    /** The BEGIN of `lazy`, with the unit's lock limit when it is not the connection's. */
    const beginText = (unit: LazyBegin) =>
      unit.lockLimitMs === undefined || unit.lockLimitMs === this.lockTimeoutMs ? 'START TRANSACTION' : `START TRANSACTION; ${lockLimit(unit.lockLimitMs)}`;
    /**
     * Sends `texts`, statements as simple queries, in one round trip, after what the unit has yet
     * to send first (its BEGIN, or its lock limit for a one-statement unit's implicit transaction);
     * resolves with the results of `texts` (the simple protocol answers each statement).
     */
    const sendSimple = async (texts: string[]): Promise<QueryResult[]> => {
      const first: string[] = [];
      if (lazy && !lazy.begun) {
        first.push(lazy.implicit ? lockLimit(lazy.lockLimitMs!) : beginText(lazy));
        lazy.begun = !lazy.implicit;
      }
      const result = (await client.query([...first, ...texts].join('; '))) as unknown as QueryResult | QueryResult[];
      const results = Array.isArray(result) ? result : [result];
      return results.slice(results.length - texts.length);
    };
    const execute = async <R>(sql: string, params: readonly unknown[] = []) => {
      if (lazy && !lazy.begun) {
        // The first statement goes with the BEGIN (or, one statement alone, with its lock limit in
        // an implicit transaction), in one round trip, when it can go as a simple query.
        const simple = asSimpleQuery(sql, params);
        if (simple !== undefined) {
          const [result] = await sendSimple([simple]);
          return { rows: result.rows as R[], affected: result.rowCount ?? result.rows.length };
        }
        lazy.begun = true;
        await client.query(beginText(lazy));
      }
      const name = this.preparedStatements.nameOf(sql, params.length);
      const values = [...params];
      // A text of several statements (no parameters: the simple protocol) answers with one result each.
      const result: QueryResult | QueryResult[] = await client.query(name === undefined ? { text: sql, values } : { name, text: sql, values });
      const rows = (Array.isArray(result) ? [] : result.rows) as R[];
      return { rows, affected: (Array.isArray(result) ? null : result.rowCount) ?? rows.length };
    };
    return {
      dialect: 'postgres',
      now: this.clock.now(),
      forUpdate: ' FOR UPDATE',
      forUpdateSkipLocked: ' FOR UPDATE SKIP LOCKED',
      execute,
      query: async <R>(sql: string, params?: readonly unknown[]) => (await execute<R>(sql, params)).rows,
      queryTogether: async (statements) => {
        const texts = statements.map(({ sql, params }) => asSimpleQuery(sql, params));
        if (statements.length > 1 && texts.every((t) => t !== undefined)) return (await sendSimple(texts as string[])).map((r) => r.rows);
        return oneAfterAnother(execute, statements);
      },
      setLockTimeout: async (ms: number) => {
        if (!lazy) throw new Error('setLockTimeout: a read runs without a transaction and holds no lock limit of its own');
        // Before the first statement the limit goes with the BEGIN; after it, on its own, unless it
        // is the limit the transaction already has (no round trip for nothing).
        const current = lazy.lockLimitMs ?? this.lockTimeoutMs;
        lazy.lockLimitMs = ms;
        if (lazy.begun && current !== ms) await client.query(lockLimit(ms));
      },
    };
  }
}

/**
 * `sql` as a simple query's text: as it is without parameters, else with them written in as
 * literals ({@link inlineParameters}); `undefined` when it cannot go so (a text of several
 * statements, or parameters that cannot be written in).
 */
function asSimpleQuery(sql: string, params: readonly unknown[]): string | undefined {
  if (sql.includes(';')) return undefined;
  return params.length === 0 ? sql : inlineParameters(sql, params);
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
      queryTogether: (statements) => (statements.forEach(once), tx.queryTogether(statements)),
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
