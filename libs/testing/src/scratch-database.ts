import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Client } from 'pg';
import { Dialect } from '@ironflow/store';
import { testDatabaseUrl } from './test-stores';

export interface ScratchDatabase {
  /** `sqlite:<temp file>` or `postgres://…/<new database>`, for a server or service process. */
  url: string;
  /** Removes the file or drops the database (forcing out open connections). */
  drop(): Promise<void>;
}

/**
 * A database of its own for tests that start whole servers or processes (which take a URL, not a
 * schema): a temp SQLite file, or a new PostgreSQL database next to IRONFLOW_TEST_DATABASE_URL.
 */
export async function scratchDatabase(dialect: Dialect, prefix = 'ironflow_scratch'): Promise<ScratchDatabase> {
  const suffix = randomBytes(6).toString('hex');
  if (dialect === 'sqlite') {
    const path = `${tmpdir()}/${prefix}-${suffix}.db`;
    return { url: `sqlite:${path}`, drop: async () => void (await Promise.all([path, `${path}-wal`, `${path}-shm`].map((p) => rm(p, { force: true })))) };
  }
  const admin = testDatabaseUrl();
  const name = `${prefix}_${suffix}`;
  await withPg(admin, (c) => c.query(`CREATE DATABASE "${name}"`));
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => withPg(admin, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined) };
}

/** Runs `work` on a new `pg` client connected to `url`, ending the client afterwards. */
export async function withPg<T>(url: string, work: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}
