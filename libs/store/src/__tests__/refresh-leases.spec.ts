/**
 * The push dispatcher's lease refresh (`leasesSql.refreshLeases`): each execution's lease is
 * extended as `refreshLease` extends one (the execution must match, an expired lease is not
 * revived), in one statement on PostgreSQL that skips a lease row another transaction holds
 * instead of waiting for it. On SQLite and PostgreSQL.
 */
import { STORES, TestStore, openLocker, openTestStore } from '@ironflow/testing';
import { leasesSql } from '@ironflow/store';

describe.each(STORES)('refreshLeases [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => {
    db = await openTestStore(dialect);
  });
  afterEach(() => db.dispose());

  const expiries = () => db.store.read('test.leases', (tx) => tx.query<{ run_id: string; expires_at: unknown }>(`SELECT run_id, expires_at FROM leases ORDER BY run_id`))
    .then((rows) => Object.fromEntries(rows.map((r) => [r.run_id, Number(r.expires_at)])));

  /** Leases: `live` and `other` (execution 1) valid, `expired` past its expiry. */
  async function leases(): Promise<number> {
    return db.store.unitOfWork('test.leases', async (tx) => {
      await leasesSql.insertLease(tx, 'live', 1, 'node-a', 'fn:', tx.now + 60_000);
      await leasesSql.insertLease(tx, 'other', 1, 'node-a', 'fn:', tx.now + 60_000);
      await leasesSql.insertLease(tx, 'expired', 1, 'node-a', 'fn:', tx.now - 1);
      return tx.now;
    });
  }

  it('extends each live lease of the named execution; an expired lease and another execution are left as they are', async () => {
    const now = await leases();
    const before = await expiries();
    const extended = await db.store.unitOfWork('test.refresh', (tx) => leasesSql.refreshLeases(tx, [
      { runId: 'live', executionSeq: 1 },
      { runId: 'other', executionSeq: 2 },
      { runId: 'expired', executionSeq: 1 },
    ], now + 90_000));
    expect(extended).toBe(1);
    expect(await expiries()).toEqual({ live: now + 90_000, other: before.other, expired: before.expired });
  });

  // PostgreSQL alone: SQLite has no row locks.
  if (dialect === 'postgres') it('skips a lease row another transaction holds, without waiting for it', async () => {
    const now = await leases();
    const before = await expiries();
    const locker = await openLocker(db);
    try {
      await locker.lockRows(`SELECT run_id FROM leases WHERE run_id = 'other' FOR UPDATE`);
      const extended = await db.store.unitOfWork('test.refresh', (tx) => leasesSql.refreshLeases(tx, [{ runId: 'live', executionSeq: 1 }, { runId: 'other', executionSeq: 1 }], now + 90_000), { oneStatement: true });
      expect(extended).toBe(1);
    } finally {
      await locker.close();
    }
    expect(await expiries()).toMatchObject({ live: now + 90_000, other: before.other });
  });
});
