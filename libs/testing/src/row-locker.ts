import { Client } from 'pg';
import { TestStore, testDatabaseUrl } from './test-stores';

/**
 * A second PostgreSQL connection that holds real locks in the test store's schema (DESIGN.md
 * "Testing": a row or table locked from another connection). Each `lock*` opens a transaction if
 * none is open; `release` rolls it back; `close` releases and disconnects.
 */
export interface Locker {
  /** Runs `sql` (e.g. `SELECT … FOR UPDATE`) inside the locker's transaction. */
  lockRows(sql: string, params?: unknown[]): Promise<void>;
  /** `LOCK TABLE <table> IN <mode> MODE` (default `ACCESS EXCLUSIVE`) inside the locker's transaction. */
  lockTable(table: string, mode?: 'ACCESS EXCLUSIVE' | 'EXCLUSIVE'): Promise<void>;
  /**
   * How many other backends wait right now on a lock the locker's transaction holds (`pg_locks`,
   * read live, with `pg_blocking_pids`): a test waits on it to know a stall has begun.
   */
  waiters(): Promise<number>;
  release(): Promise<void>;
  close(): Promise<void>;
}

/** Connects a locker to `db` (PostgreSQL only). */
export async function openLocker(db: TestStore): Promise<Locker> {
  if (db.dialect !== 'postgres') throw new Error('a locker needs PostgreSQL');
  const schema = String((await db.store.read('schema', (tx) => tx.query<{ s: string }>(`SELECT current_schema() AS s`)))[0].s);
  const client = new Client({ connectionString: testDatabaseUrl(), options: `-c search_path="${schema}"` });
  await client.connect();
  let open = false;
  const begin = async () => {
    if (!open) await client.query('BEGIN');
    open = true;
  };
  const release = async () => {
    if (open) await client.query('ROLLBACK');
    open = false;
  };
  return {
    lockRows: async (sql, params = []) => { await begin(); await client.query(sql, params); },
    lockTable: async (table, mode = 'ACCESS EXCLUSIVE') => { await begin(); await client.query(`LOCK TABLE ${table} IN ${mode} MODE`); },
    waiters: async () => {
      const { rows } = await client.query<{ n: number }>(`SELECT COUNT(DISTINCT pid)::int AS n FROM pg_locks WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))`);
      return rows[0].n;
    },
    release,
    close: async () => { await release().catch(() => undefined); await client.end(); },
  };
}
