/**
 * The live `cancel_on` match's first read for several events at once (issue 11): the distinct
 * `match` paths of each event name's specs, by project, env and name, one statement on PostgreSQL.
 */
import { STORES, TestStore, openTestStore } from '@ironflow/testing';
import { cancelOnSql } from '@ironflow/store';

describe.each(STORES)('cancel_on match paths of several events [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => {
    db = await openTestStore(dialect);
  });
  afterEach(() => db.dispose());

  const spec = (runId: string, specIndex: number, eventName: string, matchPath: string | null) => ({ runId, specIndex, eventName, matchPath, matchValue: matchPath ? '"v"' : null, condition: null });

  it('gives each event name its distinct paths (null for a spec without one) and leaves out names no spec waits for', async () => {
    await db.store.unitOfWork('specs', async (tx) => {
      await cancelOnSql.insertSpecs(tx, 'p', 'e', [spec('r1', 0, 'order.cancelled', 'data.id'), spec('r1', 1, 'user.deleted', null)]);
      await cancelOnSql.insertSpecs(tx, 'p', 'e', [spec('r2', 0, 'order.cancelled', 'data.id'), spec('r2', 1, 'order.cancelled', 'data.other')]);
      await cancelOnSql.insertSpecs(tx, 'p', 'other-env', [spec('r3', 0, 'order.cancelled', 'data.elsewhere')]);
    });
    const keys = [
      { project: 'p', env: 'e', eventName: 'order.cancelled' },
      { project: 'p', env: 'e', eventName: 'user.deleted' },
      { project: 'p', env: 'e', eventName: 'nobody.waits' },
      { project: 'p', env: 'e', eventName: 'order.cancelled' }, // asked twice
    ];
    const paths = await db.store.read('paths', (tx) => cancelOnSql.listMatchPaths(tx, keys));
    expect([...paths.keys()].sort()).toEqual([cancelOnSql.specKeyOf(keys[0]), cancelOnSql.specKeyOf(keys[1])].sort());
    expect(paths.get(cancelOnSql.specKeyOf(keys[0]))?.sort()).toEqual(['data.id', 'data.other']);
    expect(paths.get(cancelOnSql.specKeyOf(keys[1]))).toEqual([null]);
    expect(await db.store.read('none', (tx) => cancelOnSql.listMatchPaths(tx, []))).toEqual(new Map());
  });
});
