import { Locker, STORES, TestStore, openLocker, openTestStore, waitFor } from '@ironflow/testing';
import { AuditWriter } from './audit-writer';
import { SlotSet } from './slot-set';
import { StoreAuditFates } from './store-audit-fates';

describe.each(STORES)('AuditWriter [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => { db = await openTestStore(dialect); });
  afterEach(() => db.dispose());

  const rows = () => db.store.read('t', (tx) => tx.query<{ event_type: string; run_id: string }>(`SELECT event_type, run_id FROM audit_events ORDER BY id`));

  it('writes rows that arrive together in one insert, in one slot', async () => {
    let units = 0;
    const counting = { ...db.store, unitOfWork: <T>(name: string, work: Parameters<typeof db.store.unitOfWork<T>>[1]) => { units += 1; return db.store.unitOfWork(name, work); } };
    const writer = new AuditWriter(counting, new SlotSet(1));
    await Promise.all(['a', 'b', 'c'].map((runId) => writer.write([{ project: 'p', env: 'e', runId, functionId: 'f', eventType: 'run.created' }])));
    expect(units).toBe(1);
    expect((await rows()).map((r) => r.run_id)).toEqual(['a', 'b', 'c']);
  });

  it('does not write rows whose write was ended before their insert began', async () => {
    const writer = new AuditWriter(db.store, new SlotSet(1));
    const ended = new AbortController();
    ended.abort();
    const results = await Promise.allSettled([
      writer.write([{ project: 'p', env: 'e', runId: 'kept', functionId: 'f', eventType: 'run.created' }]),
      writer.write([{ project: 'p', env: 'e', runId: 'dropped', functionId: 'f', eventType: 'run.created' }], { signal: ended.signal }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect((await rows()).map((r) => r.run_id)).toEqual(['kept']);
  });

  it('does not write rows whose budget ran out before their insert began, and says so', async () => {
    const writer = new AuditWriter(db.store, new SlotSet(1));
    const results = await Promise.allSettled([
      writer.write([{ project: 'p', env: 'e', runId: 'late', functionId: 'f', eventType: 'run.created' }], { budgetMs: 0 }),
      writer.write([{ project: 'p', env: 'e', runId: 'kept', functionId: 'f', eventType: 'run.created' }], { budgetMs: 5000 }),
    ]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { name: 'AuditNotWritten', reason: 'budget' } });
    expect(results[1].status).toBe('fulfilled');
    expect((await rows()).map((r) => r.run_id)).toEqual(['kept']);
  });

  it('stamps a row with its own time, capped at the store clock', async () => {
    const writer = new AuditWriter(db.store, new SlotSet(1));
    const future = db.clock.now() + 3_600_000;
    await writer.write([{ project: 'p', env: 'e', runId: 'r', functionId: 'f', eventType: 'run.created', ts: 1000 }]);
    await writer.write([{ project: 'p', env: 'e', runId: 'r', functionId: 'f', eventType: 'run.status_changed', ts: future }]);
    const ts = await db.store.read('t', (tx) => tx.query<{ ts: unknown }>(`SELECT ts FROM audit_events ORDER BY id`));
    expect(Number(ts[0].ts)).toBe(1000);
    expect(Number(ts[1].ts)).toBeLessThan(future);
  });
});

describe.each(STORES)('AuditWriter and StoreAuditFates [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => { db = await openTestStore(dialect); });
  afterEach(() => db.dispose());

  const row = (runId: string) => ({ project: 'p', env: 'e', runId, functionId: 'f', eventType: 'run.created' });
  const stored = () => db.store.read('t', (tx) => tx.query<{ run_id: string }>(`SELECT run_id FROM audit_events ORDER BY id`)).then((rows) => rows.map((r) => r.run_id));

  it('of a writer and a sender settling one request, the first wins: given-up rows are never stored, stored rows are never given up', async () => {
    const writer = new AuditWriter(db.store, new SlotSet(1));
    const fates = new StoreAuditFates(db.store);
    expect(await fates.giveUp('r1', 1000)).toBe(true);
    const results = await Promise.allSettled([writer.write([row('given-up')], { requestId: 'r1' }), writer.write([row('kept')], { requestId: 'r2' })]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { name: 'AuditNotWritten', reason: 'budget' } });
    expect(results[1].status).toBe('fulfilled');
    expect(await fates.giveUp('r2', 1000)).toBe(false);
    expect(await stored()).toEqual(['kept']);
  });
});

describe('StoreAuditFates [postgres]', () => {
  let db: TestStore;
  let locker: Locker;
  beforeEach(async () => {
    db = await openTestStore('postgres');
    locker = await openLocker(db);
  });
  afterEach(async () => {
    await locker.close();
    await db.dispose();
  });

  it('waits for a writer\'s open insert of the request, at most its limit; a writer that rolls back leaves the request to the sender', async () => {
    await locker.lockRows(`INSERT INTO audit_write_fates (request_id, fate, at) VALUES ('r1', 'written', 0)`);
    const fates = new StoreAuditFates(db.store);
    await expect(fates.giveUp('r1', 200)).rejects.toMatchObject({ name: 'LockTimeoutError' });
    const settling = fates.giveUp('r1', 10_000);
    await waitFor('the sender waits on the writer\'s insert', async () => (await locker.waiters()) === 1);
    await locker.release();
    expect(await settling).toBe(true);
  });
});
