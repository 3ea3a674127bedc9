/**
 * The audit-writer's statements (issue 11: one shape whatever the batch size on PostgreSQL): a
 * batch's rows land in their order with their values, and fates settle once per request id, on
 * SQLite and PostgreSQL.
 */
import { STORES, TestStore, openTestStore } from '@ironflow/testing';
import { auditSql } from '@ironflow/store';

describe.each(STORES)('audit rows and fates [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => {
    db = await openTestStore(dialect);
  });
  afterEach(() => db.dispose());

  it('a batch of many rows lands in its order, each with its values; a row time past the unit’s is capped', async () => {
    const rows = Array.from({ length: 40 }, (_v, i) => ({
      runId: i % 3 === 0 ? null : `r${i}`,
      functionId: i % 2 === 0 ? 'f' : null,
      eventType: 'run.status_changed',
      cause: i % 5 === 0 ? undefined : `c${i}`,
      data: i % 4 === 0 ? undefined : { i, nested: [i, 'x'] },
      ts: i === 7 ? Number.MAX_SAFE_INTEGER : 1000 + i,
    }));
    const now = await db.store.unitOfWork('insert', async (tx) => {
      await auditSql.insertAuditRows(tx, rows);
      return tx.now;
    });
    const stored = await db.store.read('read', (tx) => tx.query<Record<string, unknown>>(`SELECT run_id, function_id, event_type, cause, data, ts FROM audit_events ORDER BY id`));
    expect(stored.map((r) => [r.run_id, r.function_id, r.event_type, r.cause, r.data === null ? null : JSON.parse(String(r.data)), Number(r.ts)])).toEqual(
      rows.map((r) => [r.runId, r.functionId, r.eventType, r.cause ?? null, r.data ?? null, r.ts === Number.MAX_SAFE_INTEGER ? now : r.ts]),
    );
  });

  it('fates settle once: a request id settled before is not returned again, whatever the batch size', async () => {
    const ids = Array.from({ length: 40 }, (_v, i) => `q${i}`);
    expect(await db.store.unitOfWork('first', (tx) => auditSql.settleAuditRequests(tx, ids.slice(0, 5), 'given_up'))).toEqual(ids.slice(0, 5));
    const settled = await db.store.unitOfWork('second', (tx) => auditSql.settleAuditRequests(tx, ids, 'written'));
    expect([...settled].sort()).toEqual(ids.slice(5).sort());
    const fates = await db.store.read('read', (tx) => tx.query<{ request_id: string; fate: string }>(`SELECT request_id, fate FROM audit_write_fates WHERE request_id IN ('q0', 'q39') ORDER BY request_id`));
    expect(fates).toEqual([{ request_id: 'q0', fate: 'given_up' }, { request_id: 'q39', fate: 'written' }]);
  });

  it('requests written together: the rows of requests settled here and of requests without an id land in their order; a request given up before is left out and returned', async () => {
    await db.store.unitOfWork('give up', (tx) => auditSql.settleAuditRequests(tx, ['gone'], 'given_up'));
    const row = (runId: string, cause: string) => ({ runId, functionId: 'f', eventType: 'run.status_changed', cause, data: { cause }, ts: 1000 });
    const givenUp = await db.store.unitOfWork('write', (tx) => auditSql.writeAuditRequests(tx, [
      { requestId: 'a', rows: [row('r1', 'a1'), row('r2', 'a2')] },
      { requestId: 'gone', rows: [row('r3', 'gone')] },
      { rows: [row('r4', 'no id')] },
      { requestId: 'a', rows: [row('r5', 'a again')] },
      { requestId: 'b', rows: [] },
    ]), { oneStatement: true, lockLimitMs: 2500 });
    expect([...givenUp]).toEqual(['gone']);
    const stored = await db.store.read('read', (tx) => tx.query<{ cause: string }>(`SELECT cause FROM audit_events ORDER BY id`));
    expect(stored.map((r) => r.cause)).toEqual(['a1', 'a2', 'no id', 'a again']);
    const fates = await db.store.read('read', (tx) => tx.query<{ request_id: string; fate: string }>(`SELECT request_id, fate FROM audit_write_fates ORDER BY request_id`));
    expect(fates).toEqual([{ request_id: 'a', fate: 'written' }, { request_id: 'b', fate: 'written' }, { request_id: 'gone', fate: 'given_up' }]);
    // Written once: the same requests again are all given up (settled before), and add no row.
    expect([...(await db.store.unitOfWork('again', (tx) => auditSql.writeAuditRequests(tx, [{ requestId: 'a', rows: [row('r6', 'late')] }])))]).toEqual(['a']);
    expect(await db.store.read('read', (tx) => tx.query(`SELECT count(*) AS n FROM audit_events`))).toEqual([{ n: dialect === 'postgres' ? '4' : 4 }]);
  });
});
