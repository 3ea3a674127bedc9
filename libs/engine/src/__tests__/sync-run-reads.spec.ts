import { Store, Tx } from '@ironflow/store';
import { SCOPE, STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { SyncRunReads } from '../sync-run-reads';
import { registerPull } from './engine-kit.test';

/**
 * The sync calls' store reads are coalesced (issue 11): one read in flight at a time; the calls
 * that ask meanwhile share the next one. The real store sits behind a hook that counts the reads
 * and can hold one (fault injection behind the port).
 */
describe.each(STORES)('coalesced sync reads [%s]', (dialect) => {
  let t: TestEngine;
  let runIds: string[];
  /** Every `readSyncRuns` read, and a gate the next ones wait on while set. */
  let reads: number;
  let gate: Promise<void> | undefined;
  let failNext: boolean;
  let store: Store;

  beforeAll(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'waits', triggers: [{ event: 'sync.read' }] });
    runIds = [];
    for (let n = 0; n < 3; n += 1) runIds.push(...(await t.engine.api.trigger(SCOPE, { event: 'sync.read', data: { n } })).runIds);
  });
  afterAll(() => t?.close());

  beforeEach(() => {
    reads = 0;
    gate = undefined;
    failNext = false;
    const inner = t.db.store;
    store = {
      dialect: inner.dialect,
      unitOfWork: (name, work) => inner.unitOfWork(name, work),
      read: async <T>(name: string, work: (tx: Tx) => Promise<T>) => {
        if (name === 'readSyncRuns') {
          reads += 1;
          await gate;
          if (failNext) {
            failNext = false;
            throw new Error('store unreachable');
          }
        }
        return inner.read(name, work);
      },
      close: () => inner.close(),
    };
  });

  it('calls that ask in one tick share one read, and each gets its own runs', async () => {
    const reader = new SyncRunReads(store);
    const [a, b] = await Promise.all([reader.read([runIds[0]]), reader.read([runIds[1], runIds[2]])]);
    expect(reads).toBe(1);
    expect(a.map((run) => run.id)).toEqual([runIds[0]]);
    expect(b.map((run) => run.id).sort()).toEqual([runIds[1], runIds[2]].sort());
  });

  it('calls that ask while a read is in flight share the next read, which begins after it', async () => {
    const reader = new SyncRunReads(store);
    let release!: () => void;
    gate = new Promise<void>((resolve) => (release = resolve));
    const first = reader.read([runIds[0]]);
    await waitFor('the first read to begin', () => reads === 1);
    const later = [reader.read([runIds[1]]), reader.read([runIds[2]]), reader.read([runIds[0]])];
    gate = undefined;
    release();
    expect((await first).map((run) => run.id)).toEqual([runIds[0]]);
    expect((await Promise.all(later)).map((runs) => runs.map((run) => run.id))).toEqual([[runIds[1]], [runIds[2]], [runIds[0]]]);
    expect(reads).toBe(2);
  });

  it('a failed read fails the calls that shared it; the next read is a new one', async () => {
    const reader = new SyncRunReads(store);
    failNext = true;
    const shared = [reader.read([runIds[0]]), reader.read([runIds[1]])];
    await expect(Promise.all(shared)).rejects.toThrow('store unreachable');
    await expect(shared[1]).rejects.toThrow('store unreachable');
    expect((await reader.read([runIds[2]])).map((run) => run.id)).toEqual([runIds[2]]);
    expect(reads).toBe(2);
  });
});
