/**
 * At most one `run.created` audit row per run (the `RunCreatedOnce` migration and the audit
 * inserts): a second row of the same run is skipped, whether it comes in a later insert or in the
 * same batch, and the migration reduces the duplicates written before it to the first. Other event
 * types may repeat. On SQLite and PostgreSQL.
 */
import { QueryRunner } from 'typeorm';
import { STORES, TestStore, openTestStore } from '@ironflow/testing';
import { auditSql } from '@ironflow/store';
import { RunCreatedOnce1734900000000 } from '../migrations/run-created-once';

describe.each(STORES)('one run.created row per run [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => {
    db = await openTestStore(dialect);
  });
  afterEach(() => db.dispose());

  const row = (runId: string, eventType: string, cause: string) => ({ runId, functionId: 'f', eventType, cause });
  const rows = () => db.store.read('test.rows', (tx) => tx.query<{ run_id: string; event_type: string; cause: string }>(`SELECT run_id, event_type, cause FROM audit_events ORDER BY id`))
    .then((all) => all.map((r) => [r.run_id, r.event_type, r.cause]));

  it('a second run.created row of a run is skipped, in a later insert or the same batch; other rows repeat', async () => {
    await db.store.unitOfWork('t', (tx) => auditSql.insertAuditRows(tx, [row('r1', 'run.created', 'first'), row('r1', 'run.created', 'same batch'), row('r1', 'run.status_changed', 'a')]));
    await db.store.unitOfWork('t', (tx) => auditSql.insertAuditRows(tx, [row('r1', 'run.created', 'later batch'), row('r2', 'run.created', 'other run'), row('r1', 'run.status_changed', 'b')]));
    await db.store.unitOfWork('t', (tx) => auditSql.insertAudit(tx, row('r2', 'run.created', 'single insert')));
    expect(await rows()).toEqual([
      ['r1', 'run.created', 'first'],
      ['r1', 'run.status_changed', 'a'],
      ['r2', 'run.created', 'other run'],
      ['r1', 'run.status_changed', 'b'],
    ]);
  });

  it('the migration keeps the first run.created row of each run and every other row', async () => {
    await db.store.unitOfWork('t', async (tx) => {
      await tx.execute(`DROP INDEX audit_events_run_created`);
      await auditSql.insertAuditRows(tx, [row('r1', 'run.created', 'first'), row('r1', 'run.status_changed', 'a'), row('r1', 'run.created', 'second'), row('r2', 'run.created', 'only'), row('r1', 'run.status_changed', 'b')]);
    });
    await db.store.unitOfWork('t', (tx) => new RunCreatedOnce1734900000000().up({ query: (sql: string) => tx.query(sql) } as unknown as QueryRunner));
    expect(await rows()).toEqual([
      ['r1', 'run.created', 'first'],
      ['r1', 'run.status_changed', 'a'],
      ['r2', 'run.created', 'only'],
      ['r1', 'run.status_changed', 'b'],
    ]);
    await db.store.unitOfWork('t', (tx) => auditSql.insertAudit(tx, row('r1', 'run.created', 'again')));
    expect((await rows()).filter(([runId, type]) => runId === 'r1' && type === 'run.created')).toHaveLength(1);
  });
});
