import { DataSource, QueryRunner } from 'typeorm';
import { Store } from '@ironflow/store';
import { testDatabaseUrl } from './test-stores';

/**
 * Row locks held by a second PostgreSQL connection in an open transaction (DESIGN.md "Testing":
 * lock a row or table from another connection), on the schema of `store`. `lock` runs a locking
 * statement (`SELECT … FOR UPDATE`, `LOCK TABLE …`, `pg_advisory_xact_lock`) in that transaction;
 * `release` rolls it back, freeing every lock, and closes the connection.
 */
export interface RowLocker {
  lock(sql: string, params?: unknown[]): Promise<void>;
  release(): Promise<void>;
}

/** Opens the second connection and its transaction. PostgreSQL only. */
export async function openRowLocker(store: Store): Promise<RowLocker> {
  if (store.dialect !== 'postgres') throw new Error('row locks need PostgreSQL');
  const schema = (await store.read('test.schema', (tx) => tx.query<{ s: string }>(`SELECT current_schema() AS s`)))[0].s;
  const ds = new DataSource({ type: 'postgres', url: testDatabaseUrl(), schema, extra: { options: `-c search_path="${schema}"`, max: 1 } });
  await ds.initialize();
  const runner: QueryRunner = ds.createQueryRunner();
  await runner.connect();
  await runner.startTransaction();
  let released = false;
  return {
    lock: async (sql, params = []) => {
      await runner.query(sql, params);
    },
    release: async () => {
      if (released) return;
      released = true;
      await runner.rollbackTransaction();
      await runner.release();
      await ds.destroy();
    },
  };
}
