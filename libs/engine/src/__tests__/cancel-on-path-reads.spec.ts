/**
 * The live matches of one event-loop turn share their first read (issue 11): one store read for
 * every `pathsOf` asked within a turn, each answered with its own event name's paths; a later turn
 * reads again (so a spec written in between is seen); a failed read rejects every match of its turn.
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

  it('answers the matches of one turn from one read, each with its own paths, and reads again in a later turn', async () => {
    const reader = new CancelOnPathReads(counted);
    const answers = await Promise.all([reader.pathsOf(key('order.cancelled')), reader.pathsOf(key('nobody.waits')), reader.pathsOf(key('order.cancelled'))]);
    expect(answers).toEqual([['data.id'], [], ['data.id']]);
    expect(reads).toEqual(['cancelOnPaths']);
    await db.store.unitOfWork('more', (tx) => cancelOnSql.insertSpecs(tx, 'p', 'e', [{ runId: 'r2', specIndex: 0, eventName: 'nobody.waits', matchPath: null, matchValue: null, condition: null }]));
    expect(await reader.pathsOf(key('nobody.waits'))).toEqual([null]);
    expect(reads).toEqual(['cancelOnPaths', 'cancelOnPaths']);
  });

  it('rejects every match of a turn whose read failed; the next turn reads afresh', async () => {
    const reader = new CancelOnPathReads(counted);
    failNext = new Error('store unavailable');
    const failed = await Promise.allSettled([reader.pathsOf(key('order.cancelled')), reader.pathsOf(key('x'))]);
    expect(failed.map((r) => (r.status === 'rejected' ? String(r.reason) : 'fulfilled'))).toEqual(['Error: store unavailable', 'Error: store unavailable']);
    expect(await reader.pathsOf(key('order.cancelled'))).toEqual(['data.id']);
    expect(reads).toHaveLength(2);
  });
});
