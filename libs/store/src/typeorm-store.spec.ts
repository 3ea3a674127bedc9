import { LockTimeoutError, unitWithLockLimit } from '@ironflow/store';
import { Locker, TestStore, openLocker, openTestStore } from '@ironflow/testing';

/**
 * The PostgreSQL unit of work begins its transaction with its first statement, in one round trip
 * with the lock limit when that comes first (issue 11): the unit is still one transaction, the
 * limit still bounds its lock waits, and a unit that runs nothing leaves its connection clean.
 */
describe('TypeormStore units of work [postgres]', () => {
  let db: TestStore;
  let locker: Locker;
  beforeEach(async () => {
    db = await openTestStore('postgres', 2);
    await db.store.unitOfWork('test.setup', (tx) => tx.query(`CREATE TABLE lazy_begin (id INT PRIMARY KEY, v TEXT)`));
    await db.store.unitOfWork('test.setup', (tx) => tx.query(`INSERT INTO lazy_begin (id, v) VALUES (1, 'a')`));
    locker = await openLocker(db);
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

  it('the limit holds inside the unit and ends with it', async () => {
    const inside = await unitWithLockLimit(db.store, 'test.unit', 1234, async (tx) => (await tx.query<{ lock_timeout: string }>('SHOW lock_timeout'))[0].lock_timeout);
    expect(inside).toBe('1234ms');
    const after = await db.store.unitOfWork('test.unit', async (tx) => (await tx.query<{ lock_timeout: string }>('SHOW lock_timeout'))[0].lock_timeout);
    expect(after).toBe('0');
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
