import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Dialect, OpenedStore, openStore } from '@ironflow/store';

/** The stores every contract test runs on (DESIGN.md "Stores"). */
export const STORES: Dialect[] = ['sqlite', 'postgres'];

export function testDatabaseUrl(): string {
  const url = process.env.IRONFLOW_TEST_DATABASE_URL;
  if (!url) throw new Error('IRONFLOW_TEST_DATABASE_URL is not set (see libs/testing/src/global-setup.ts)');
  return url;
}

export interface TestStore extends OpenedStore {
  dialect: Dialect;
  /** Opens another store on the same database (a fresh engine instance after a "crash"). */
  reopen(): Promise<OpenedStore>;
  /** Closes every store opened here and drops the test schema. */
  dispose(): Promise<void>;
}

/**
 * A fresh, migrated store: SQLite in a temp file, or PostgreSQL in a schema of its own so suites
 * run in parallel. `poolSize` applies to PostgreSQL.
 */
export async function openTestStore(dialect: Dialect, poolSize = 8): Promise<TestStore> {
  const suffix = randomBytes(6).toString('hex');
  const opened: OpenedStore[] = [];
  let open: () => Promise<OpenedStore>;
  let cleanup: () => Promise<void>;
  if (dialect === 'sqlite') {
    const path = `${require('node:os').tmpdir()}/ironflow-test-${suffix}.db`;
    open = () => openStore({ url: `sqlite:${path}` });
    cleanup = async () => {
      const fs = await import('node:fs/promises');
      await Promise.all([path, `${path}-wal`, `${path}-shm`].map((p) => fs.rm(p, { force: true })));
    };
  } else {
    const schema = `ironflow_test_${suffix}`;
    open = () => openStore({ url: testDatabaseUrl(), schema, poolSize });
    cleanup = async () => {
      const ds = new DataSource({ type: 'postgres', url: testDatabaseUrl() });
      await ds.initialize();
      await ds.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await ds.destroy();
    };
  }
  const first = await open();
  opened.push(first);
  return {
    ...first,
    dialect,
    reopen: async () => {
      const next = await open();
      opened.push(next);
      return next;
    },
    dispose: async () => {
      for (const o of opened) await o.store.close();
      await cleanup();
    },
  };
}
