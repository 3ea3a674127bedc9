import { DataSource } from 'typeorm';
import { TestEngine, openTestEngine, testDatabaseUrl } from '@ironflow/testing';
import { endChild, parentWaitingOnChild, readRun, readStep, registerParentAndChild } from './contract/post-commit-kit';

/** PostgreSQL only: it needs a real row lock held by another connection. */
describe('a wake on a locked parent row [postgres]', () => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine('postgres', { lockLimitMs: 200, followUpDrainMs: 1000 });
    await registerParentAndChild(t, 'push');
  });
  afterEach(() => t.close());

  it('gives up within its lock timeout, keeps the wake pending, and a later pass applies it', async () => {
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    const schema = (await t.db.store.read('t', (tx) => tx.query<{ s: string }>(`SELECT current_schema() AS s`)))[0].s;
    const other = new DataSource({ type: 'postgres', url: testDatabaseUrl(), schema, extra: { options: `-c search_path="${schema}"`, max: 1 } });
    await other.initialize();
    const locker = other.createQueryRunner();
    await locker.connect();
    await locker.startTransaction();
    await locker.query(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [parentId]);
    try {
      const started = Date.now();
      await endChild(t.engine, t.scope, childId, 'completed');
      await t.engine.resources.followUps.drain(5000);
      expect(Date.now() - started).toBeLessThan(3000);
      expect(await readRun(t, childId)).toMatchObject({ status: 'completed', wakePending: true });
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
    } finally {
      await locker.rollbackTransaction();
      await locker.release();
      await other.destroy();
    }
    expect(await t.engine.wakes.waitingRunPass()).toBe(1);
    await t.engine.resources.followUps.drain(5000);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await readRun(t, childId)).toMatchObject({ wakePending: false });
  });
});
