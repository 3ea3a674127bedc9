import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { LockTimeoutError, OpenedStore, Tx, openStore, unitWithLockLimit } from '@ironflow/store';
import { Locker, TestStore, openLocker, openSqliteElsewhere, openTestStore, testDatabaseUrl, waitFor } from '@ironflow/testing';

/** A PostgreSQL test store (pool of 2) with a table `table` holding the row (1, 'a'), and a locker on the same database. */
async function storeWithRow(table: string): Promise<{ db: TestStore; locker: Locker }> {
  const db = await openTestStore('postgres', 2);
  await db.store.unitOfWork('test.setup', (tx) => tx.query(`CREATE TABLE ${table} (id INT PRIMARY KEY, v TEXT)`));
  await db.store.unitOfWork('test.setup', (tx) => tx.query(`INSERT INTO ${table} (id, v) VALUES (1, 'a')`));
  return { db, locker: await openLocker(db) };
}

/**
 * The PostgreSQL unit of work begins its transaction with its first statement, in one round trip
 * with the lock limit when that comes first, and with the statement itself when it has no
 * parameters (issue 11): the unit is still one transaction, the
 * limit still bounds its lock waits, and a unit that runs nothing leaves its connection clean.
 */
describe('TypeormStore units of work [postgres]', () => {
  let db: TestStore;
  let locker: Locker;
  beforeEach(async () => {
    ({ db, locker } = await storeWithRow('lazy_begin'));
  });
  afterEach(async () => {
    await locker.close();
    await db.dispose();
  });

  const rows = () => db.store.read('test.read', (tx) => tx.query<{ id: number; v: string }>(`SELECT id, v FROM lazy_begin ORDER BY id`));

  it('a unit begun by its lock limit is one transaction: a throw after its writes rolls them all back', async () => {
    await expect(
      unitWithLockLimit(db.store, 'test.unit', 1000, async (tx) => {
        await tx.query(`INSERT INTO lazy_begin (id, v) VALUES (2, 'b')`);
        await tx.query(`UPDATE lazy_begin SET v = 'changed' WHERE id = 1`);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await rows()).toEqual([{ id: 1, v: 'a' }]);
  });

  const lockTimeout = async (tx: { query<R>(sql: string): Promise<R[]> }) => (await tx.query<{ lock_timeout: string }>('SHOW lock_timeout'))[0].lock_timeout;

  it('the limit holds inside the unit and ends with it: after it, the connection\'s default (1 s) is back', async () => {
    expect(await unitWithLockLimit(db.store, 'test.unit', 1234, lockTimeout)).toBe('1234ms');
    expect(await db.store.unitOfWork('test.unit', lockTimeout)).toBe('1s');
    expect(await db.store.read('test.read', lockTimeout)).toBe('1s');
    expect(await db.store.unitOfWork('test.one', lockTimeout, { oneStatement: true })).toBe('1s');
  });

  it('a one-statement unit with a lock limit other than the connection\'s holds it in the implicit transaction of one simple query; at the connection\'s limit, it runs as it is', async () => {
    const read = `SELECT current_setting('lock_timeout') AS lock_timeout, v FROM lazy_begin WHERE id = $1`;
    const run = (lockLimitMs: number, id: unknown = 1) => unitWithLockLimit(db.store, 'test.one', lockLimitMs, async (tx) => (await tx.query<{ lock_timeout: string; v: string }>(read, [id]))[0], { oneStatement: true });
    expect(await run(1234)).toEqual({ lock_timeout: '1234ms', v: 'a' });
    expect(await run(1000)).toEqual({ lock_timeout: '1s', v: 'a' });
    // The limit ends with the statement: the connection's default is back for the next unit.
    expect(await db.store.unitOfWork('test.unit', lockTimeout)).toBe('1s');
    // A lock wait past it fails the statement, which changed nothing.
    await locker.lockRows(`SELECT id FROM lazy_begin WHERE id = 1 FOR UPDATE`);
    const began = Date.now();
    await expect(unitWithLockLimit(db.store, 'test.one', 50, (tx) => tx.query(`UPDATE lazy_begin SET v = $1 WHERE id = 1`, ['changed']), { oneStatement: true })).rejects.toBeInstanceOf(LockTimeoutError);
    expect(Date.now() - began).toBeLessThan(900); // not the connection's 1 s
    await locker.release();
    // One statement, no transaction of its own: a second statement throws, the first stays committed.
    await expect(
      unitWithLockLimit(db.store, 'test.one', 1234, async (tx) => {
        await tx.query(`INSERT INTO lazy_begin (id, v) VALUES ($1, $2)`, [30, 'x']);
        await tx.query(`INSERT INTO lazy_begin (id, v) VALUES (31, 'y')`);
      }, { oneStatement: true }),
    ).rejects.toThrow('one statement');
    expect(await rows()).toEqual([{ id: 1, v: 'a' }, { id: 30, v: 'x' }]);
  });

  it('a one-statement unit with its own lock limit whose statement cannot be written as a simple query runs in a transaction holding the limit', async () => {
    // A binary value is not written into a simple query: the statement goes with its parameters, after a BEGIN.
    const read = `SELECT current_setting('lock_timeout') AS lock_timeout, now() <> statement_timestamp() AS open, length($1::bytea) AS n`;
    expect(await unitWithLockLimit(db.store, 'test.one', 1234, async (tx) => (await tx.query(read, [Buffer.from([0, 1])]))[0], { oneStatement: true })).toEqual({ lock_timeout: '1234ms', open: true, n: 2 });
  });

  it('a first statement with parameters goes with the BEGIN, written as literals: its rows come back, and the unit is one transaction', async () => {
    const tricky = `it's a \\ back'slash; $2 -- not a comment`;
    await expect(
      unitWithLockLimit(db.store, 'test.unit', 1234, async (tx) => {
        await tx.query(`INSERT INTO lazy_begin (id, v) VALUES ($1, $2)`, [40, tricky]);
        expect(await tx.query(`SELECT v FROM lazy_begin WHERE id = $1`, [40])).toEqual([{ v: tricky }]);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await rows()).toEqual([{ id: 1, v: 'a' }]);
  });

  it('a first statement without parameters goes with the BEGIN, in the unit: its rows come back, its lock wait has the unit\'s limit, a later one the new limit', async () => {
    const read = `SELECT v FROM lazy_begin WHERE id = 1 FOR UPDATE`;
    expect(await unitWithLockLimit(db.store, 'test.unit', 1234, async (tx) => [await tx.query<{ v: string }>(read), await lockTimeout(tx)])).toEqual([[{ v: 'a' }], '1234ms']);
    await locker.lockRows(`SELECT id FROM lazy_begin WHERE id = 1 FOR UPDATE`);
    const began = Date.now();
    await expect(unitWithLockLimit(db.store, 'test.unit', 50, (tx) => tx.query(read))).rejects.toBeInstanceOf(LockTimeoutError);
    expect(Date.now() - began).toBeLessThan(900); // not the connection's 1 s
    await expect(
      db.store.unitOfWork('test.unit', async (tx) => {
        await tx.query(`SELECT 1 AS one`);
        await tx.setLockTimeout(1000); // the limit it has: nothing sent
        expect(await lockTimeout(tx)).toBe('1s');
        await tx.setLockTimeout(60);
        await tx.query(read);
      }),
    ).rejects.toBeInstanceOf(LockTimeoutError);
    await locker.release();
    expect(await rows()).toEqual([{ id: 1, v: 'a' }]);
  });

  it('statements sent together run in order and answer each with its rows: with the BEGIN, inside a transaction, in a read; a failure ends the unit', async () => {
    const together = (tx: Tx) => tx.queryTogether([
      { sql: `SELECT current_setting('lock_timeout') AS lock_timeout`, params: [] },
      { sql: `UPDATE lazy_begin SET v = $1 WHERE id = $2 RETURNING v`, params: [`o'k`, 1] },
      { sql: `SELECT v FROM lazy_begin WHERE id = $1`, params: [1] },
    ]);
    // Its unit's first statements, with the BEGIN and the unit's limit; then rolled back with the unit.
    await expect(unitWithLockLimit(db.store, 'test.unit', 1234, async (tx) => {
      expect(await together(tx)).toEqual([[{ lock_timeout: '1234ms' }], [{ v: `o'k` }], [{ v: `o'k` }]]);
      throw new Error('boom');
    })).rejects.toThrow('boom');
    expect(await rows()).toEqual([{ id: 1, v: 'a' }]);
    // After another statement, inside the transaction; committed with it.
    expect(await db.store.unitOfWork('test.unit', async (tx) => {
      await tx.query(`SELECT 1 AS one`);
      return together(tx);
    })).toEqual([[{ lock_timeout: '1s' }], [{ v: `o'k` }], [{ v: `o'k` }]]);
    expect(await rows()).toEqual([{ id: 1, v: `o'k` }]);
    // Parameters that cannot be written in: one after another, with the same answers.
    expect(await db.store.read('test.read', (tx) => tx.queryTogether([
      { sql: `SELECT length($1::bytea) AS n`, params: [Buffer.from([0, 1, 2])] },
      { sql: `SELECT v FROM lazy_begin WHERE id = $1`, params: [1] },
    ]))).toEqual([[{ n: 3 }], [{ v: `o'k` }]]);
    // A statement that fails ends the unit: the ones before it roll back, the ones after it never run.
    await expect(db.store.unitOfWork('test.unit', (tx) => tx.queryTogether([
      { sql: `UPDATE lazy_begin SET v = $1 WHERE id = 1`, params: ['lost'] },
      { sql: `SELECT 1 / $1::int AS boom`, params: [0] },
      { sql: `INSERT INTO lazy_begin (id, v) VALUES ($1, $2)`, params: [9, 'never'] },
    ]))).rejects.toThrow('division by zero');
    expect(await rows()).toEqual([{ id: 1, v: `o'k` }]);
    // A one-statement unit takes one statement together, not two.
    await expect(db.store.unitOfWork('test.one', (tx) => tx.queryTogether([{ sql: 'SELECT 1', params: [] }, { sql: 'SELECT 2', params: [] }]), { oneStatement: true })).rejects.toThrow('one statement');
  });

  it('a lock wait past the limit rolls the unit back with LockTimeoutError', async () => {
    await locker.lockRows(`SELECT id FROM lazy_begin WHERE id = 1 FOR UPDATE`);
    await expect(
      unitWithLockLimit(db.store, 'test.unit', 50, async (tx) => {
        await tx.query(`INSERT INTO lazy_begin (id, v) VALUES (3, 'c')`);
        await tx.query(`UPDATE lazy_begin SET v = 'changed' WHERE id = 1`);
      }),
    ).rejects.toBeInstanceOf(LockTimeoutError);
    await locker.release();
    expect(await rows()).toEqual([{ id: 1, v: 'a' }]);
  });

  it('a one-statement unit runs its statement without BEGIN/COMMIT, committed on its own; a second statement throws and leaves the first committed', async () => {
    const inBlock = await db.store.unitOfWork('test.one', async (tx) => (await tx.query<{ open: boolean }>(`SELECT now() <> statement_timestamp() AS open`))[0].open, { oneStatement: true });
    expect(inBlock).toBe(false);
    await expect(
      db.store.unitOfWork('test.one', async (tx) => {
        await tx.query(`INSERT INTO lazy_begin (id, v) VALUES (20, 'x')`);
        await tx.query(`INSERT INTO lazy_begin (id, v) VALUES (21, 'y')`);
      }, { oneStatement: true }),
    ).rejects.toThrow('one statement');
    expect(await rows()).toEqual([{ id: 1, v: 'a' }, { id: 20, v: 'x' }]);
  });

  it('closing the store rejects a read still waiting for a connection at once; the reads holding the connections finish, then it closes', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding = 0;
    const held = [1, 2].map(() =>
      db.store.read('test.hold', async (tx) => {
        const rows = await tx.query<{ one: number }>('SELECT 1 AS one');
        holding += 1;
        await released;
        return rows;
      }),
    );
    await waitFor('both connections of the pool to be held', () => holding === 2);
    const queued = db.store.read('test.queued', (tx) => tx.query('SELECT 1'));
    const closing = db.store.close();
    await expect(queued).rejects.toThrow('the store is closed: test.queued got no connection');
    await expect(db.store.read('test.later', (tx) => tx.query('SELECT 1'))).rejects.toThrow('the store is closed: test.later got no connection');
    release();
    expect(await Promise.all(held)).toEqual([[{ one: 1 }], [{ one: 1 }]]);
    await closing;
  });

  it('a unit that runs no statement resolves with its value; the units after it on the same connections are transactions of their own', async () => {
    // A pool of 2: each connection serves a unit that ran nothing, then a write that must commit on its own.
    for (let i = 0; i < 4; i += 1) expect(await db.store.unitOfWork('test.empty', async () => i)).toBe(i);
    const writes = [10, 11].map((id) => db.store.unitOfWork('test.write', async (tx) => {
      await tx.query(`INSERT INTO lazy_begin (id, v) VALUES ($1, 'w')`, [id]);
      return (await tx.query<{ open: boolean }>(`SELECT now() <> statement_timestamp() OR pg_current_xact_id_if_assigned() IS NOT NULL AS open`))[0].open;
    }));
    expect(await Promise.all(writes)).toEqual([true, true]);
    expect((await rows()).map((r) => r.id)).toEqual([1, 10, 11]);
  });
});

/**
 * The lock limit PostgreSQL runtime connections carry (`StoreOptions.lockTimeoutMs`): a statement
 * without a limit of its own gives up at it, while the migrations, on connections of their own,
 * wait for their locks as long as it takes.
 */
describe('the connections\' lock limit [postgres]', () => {
  const LIMIT_MS = 100;
  let db: TestStore;
  let limited: OpenedStore | undefined;
  let locker: Locker;
  let schema: string;
  beforeEach(async () => {
    ({ db, locker } = await storeWithRow('locked'));
    schema = (await db.store.read('test.schema', (tx) => tx.query<{ s: string }>(`SELECT current_schema() AS s`)))[0].s;
  });
  afterEach(async () => {
    await locker.close();
    await limited?.store.close();
    limited = undefined;
    await db.dispose();
  });

  const open = () => openStore({ url: testDatabaseUrl(), schema, poolSize: 2, lockTimeoutMs: LIMIT_MS });

  it('a one-statement unit and a read on a lock held past the limit reject with LockTimeoutError at the connection\'s limit, changing nothing', async () => {
    limited = await open();
    await locker.lockTable('locked');
    await expect(limited.store.unitOfWork('test.one', (tx) => tx.query(`UPDATE locked SET v = 'b' WHERE id = 1`), { oneStatement: true })).rejects.toMatchObject({ name: 'LockTimeoutError', code: 'UNAVAILABLE', details: { unit: 'test.one', limitMs: LIMIT_MS } });
    await expect(limited.store.read('test.read', (tx) => tx.query(`SELECT v FROM locked`))).rejects.toBeInstanceOf(LockTimeoutError);
    await locker.release();
    expect(await limited.store.read('test.read', (tx) => tx.query(`SELECT v FROM locked`))).toEqual([{ v: 'a' }]);
  });

  it('the migrations wait for a lock past the limit: the store opens once the lock clears', async () => {
    await locker.lockTable('ironflow_migrations');
    const opening = open();
    opening.catch(() => undefined);
    await waitFor('the migrations to wait on the lock', async () => (await locker.waiters()) > 0);
    // A window, not a hope: the claim is that nothing happens (no give-up) for twice the limit,
    // measured from the moment the migration waits; a migration bound by the limit would have failed.
    await delay(2 * LIMIT_MS);
    await locker.release();
    limited = await opening;
    expect(await limited.store.read('test.read', (tx) => tx.query(`SELECT v FROM locked`))).toEqual([{ v: 'a' }]);
  });

  it('refuses a lock limit that is not a whole number of ms, 0 or more', async () => {
    await expect(openStore({ url: testDatabaseUrl(), schema, lockTimeoutMs: -1 })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'lockTimeoutMs' } });
    await expect(openStore({ url: testDatabaseUrl(), schema, lockTimeoutMs: 1.5 })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'lockTimeoutMs' } });
  });
});

/**
 * `OpenedStore.exclusive`: whether this process holds the database alone, which lets `ironflow dev`
 * treat every push lease it finds at start as a dead process's. Only SQLite opened with `exclusive`;
 * PostgreSQL never (other nodes may share it, whatever the option says).
 */
describe('OpenedStore.exclusive', () => {
  it('is true for SQLite opened exclusive, false for SQLite otherwise and for PostgreSQL even when asked', async () => {
    const sqlite = await openTestStore('sqlite');
    const exclusive = await openStore({ url: 'sqlite::memory:', exclusive: true });
    const postgres = await openTestStore('postgres', 2);
    const schema = (await postgres.store.read('test.schema', (tx) => tx.query<{ s: string }>(`SELECT current_schema() AS s`)))[0].s;
    const shared = await openStore({ url: testDatabaseUrl(), schema, poolSize: 1, exclusive: true });
    try {
      expect([sqlite.exclusive, exclusive.exclusive, postgres.exclusive, shared.exclusive]).toEqual([false, true, false, false]);
    } finally {
      await Promise.all([exclusive.store.close(), shared.store.close()]);
      await Promise.all([sqlite.dispose(), postgres.dispose()]);
    }
  });

  it('an exclusive SQLite open holds the file from the start, even when it writes nothing: a second open fails', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ironflow-exclusive-'));
    const url = `sqlite:${join(dir, 'dev.db')}`;
    try {
      await (await openStore({ url, exclusive: true })).store.close(); // migrated: the next open writes nothing
      const first = await openStore({ url, exclusive: true });
      try {
        expect(await openSqliteElsewhere(join(dir, 'dev.db'))).toMatch(/locked|busy/i);
      } finally {
        await first.store.close();
      }
      expect(await openSqliteElsewhere(join(dir, 'dev.db'))).toBe('opened'); // free again once it closed
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
