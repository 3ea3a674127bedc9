/**
 * The live matches share their first read (issue 11): a match asked for while no read is under way
 * reads at once; those asked for during a read share the next one, each answered with its own
 * event name's paths; a read starts after every match it answers asked (so a spec written before
 * the ask is seen); a failed read rejects every match it was for.
 */
import { Store, cancelOnSql } from '@ironflow/store';
import { STORES, TestStore, openTestStore } from '@ironflow/testing';
import { CancelOnPathReads } from '../cancel-on-path-reads';

describe.each(STORES)('CancelOnPathReads [%s]', (dialect) => {
  let db: TestStore;
  let reads: string[];
  let failNext: Error | undefined;
  let counted: Store;
  beforeEach(async () => {
    db = await openTestStore(dialect);
    reads = [];
    failNext = undefined;
    counted = {
      ...db.store,
      dialect: db.store.dialect,
      unitOfWork: db.store.unitOfWork.bind(db.store),
      read: (name, work) => {
        reads.push(name);
        const err = failNext;
        failNext = undefined;
        return err ? Promise.reject(err) : db.store.read(name, work);
      },
    } as Store;
    await db.store.unitOfWork('specs', (tx) => cancelOnSql.insertSpecs(tx, 'p', 'e', [{ runId: 'r1', specIndex: 0, eventName: 'order.cancelled', matchPath: 'data.id', matchValue: '"1"', condition: null }]));
  });
  afterEach(() => db.dispose());

  const key = (eventName: string) => ({ project: 'p', env: 'e', eventName });

  it('reads at once for a match when no read is under way; the matches asked meanwhile share the next read, each with its own paths', async () => {
    const reader = new CancelOnPathReads(counted);
    const answers = await Promise.all([
      reader.pathsOf(key('order.cancelled')),
      reader.pathsOf(key('nobody.waits')),
      reader.pathsOf(key('order.cancelled')),
      reader.pathsOf(key('user.deleted')),
    ]);
    expect(answers).toEqual([['data.id'], [], ['data.id'], []]);
    expect(reads).toEqual(['cancelOnPaths', 'cancelOnPaths']); // the first alone, the three asked during it together
    await db.store.unitOfWork('more', (tx) => cancelOnSql.insertSpecs(tx, 'p', 'e', [{ runId: 'r2', specIndex: 0, eventName: 'nobody.waits', matchPath: null, matchValue: null, condition: null }]));
    expect(await reader.pathsOf(key('nobody.waits'))).toEqual([null]);
    expect(reads).toHaveLength(3);
  });

  it('rejects every match of a read that failed; the matches after it read afresh', async () => {
    const reader = new CancelOnPathReads(counted);
    failNext = new Error('store unavailable');
    const failed = await Promise.allSettled([reader.pathsOf(key('order.cancelled')), reader.pathsOf(key('x'))]);
    // The first read failed; the second match, asked during it, had a read of its own.
    expect(failed.map((r) => (r.status === 'rejected' ? String(r.reason) : r.value))).toEqual(['Error: store unavailable', []]);
    expect(await reader.pathsOf(key('order.cancelled'))).toEqual(['data.id']);
    expect(reads).toHaveLength(3);
  });
});
