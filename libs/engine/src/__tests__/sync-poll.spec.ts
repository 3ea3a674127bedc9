import { RunRecord, Store, Tx } from '@ironflow/store';
import { SCOPE, STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { SyncPoll } from '../sync-poll';
import { registerPull } from './engine-kit.test';

/** Poll period of these tests, ms. */
const PERIOD_MS = 20;

/**
 * The sync calls' store poll (issue 11): one read per period for all the calls waiting in the
 * process, of their runs that ended. The real store sits behind a hook that counts the reads and
 * can hold or fail one (fault injection behind the port).
 */
describe.each(STORES)('the sync calls\' shared store poll [%s]', (dialect) => {
  let t: TestEngine;
  /** Three cancelled runs, then one that stays queued. */
  let ended: string[];
  let going: string;
  /** Every `readSyncRuns` read, the reads in flight now and at most, and a gate the next ones wait on while set. */
  let reads: number;
  let inFlight: number;
  let mostInFlight: number;
  let gate: Promise<void> | undefined;
  let failNext: boolean;
  let store: Store;
  let poll: SyncPoll;
  let unwatches: (() => void)[];

  beforeAll(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'waits', triggers: [{ event: 'sync.read' }] });
    const ids: string[] = [];
    for (let n = 0; n < 4; n += 1) ids.push(...(await t.engine.api.trigger(SCOPE, { event: 'sync.read', data: { n } })).runIds);
    going = ids.pop()!;
    ended = ids;
    for (const id of ended) await t.engine.api.cancelRun(SCOPE, id, 'ended for the poll');
  });
  afterAll(() => t?.close());

  beforeEach(() => {
    reads = 0;
    inFlight = 0;
    mostInFlight = 0;
    gate = undefined;
    failNext = false;
    unwatches = [];
    const inner = t.db.store;
    store = {
      dialect: inner.dialect,
      unitOfWork: (name, work) => inner.unitOfWork(name, work),
      read: async <T>(name: string, work: (tx: Tx) => Promise<T>) => {
        if (name !== 'readSyncRuns') return inner.read(name, work);
        reads += 1;
        inFlight += 1;
        mostInFlight = Math.max(mostInFlight, inFlight);
        try {
          await gate;
          if (failNext) {
            failNext = false;
            throw new Error('store unreachable');
          }
          return await inner.read(name, work);
        } finally {
          inFlight -= 1;
        }
      },
      close: () => inner.close(),
    };
    poll = new SyncPoll(store, PERIOD_MS);
  });
  afterEach(async () => {
    for (const unwatch of unwatches) unwatch();
    gate = undefined;
    await waitFor('the last read to end', () => inFlight === 0);
  });

  /** Watches `runIds`: what each poll found ended (with the read count when it came) and the failures. */
  function watch(runIds: string[]) {
    const seen: { reads: number; ids: string[] }[] = [];
    const failures: unknown[] = [];
    unwatches.push(poll.watch(runIds, (runs: RunRecord[]) => seen.push({ reads, ids: runs.map((run) => run.id).sort() }), (err) => failures.push(err)));
    return { seen, failures };
  }

  it('calls that began together share one read, and each gets its own runs that ended (a run still going is left out)', async () => {
    const a = watch([ended[0]]);
    const b = watch([ended[1], ended[2], going]);
    await waitFor('both calls to hear from the poll', () => a.seen.length > 0 && b.seen.length > 0);
    expect(a.seen[0]).toEqual({ reads: 1, ids: [ended[0]] });
    expect(b.seen[0]).toEqual({ reads: 1, ids: [ended[1], ended[2]].sort() });
  });

  it('a call that waits for a run still going is polled at every period and hears nothing', async () => {
    const c = watch([going]);
    await waitFor('three polls', () => reads >= 3);
    expect(c.seen).toEqual([]);
    expect(c.failures).toEqual([]);
  });

  it('one read is in flight at a time: the periods that pass during a read are skipped', async () => {
    let release!: () => void;
    gate = new Promise<void>((resolve) => (release = resolve));
    const a = watch([ended[0]]);
    await waitFor('the first read to begin', () => reads === 1);
    const b = watch([ended[1]]);
    const heldAt = Date.now();
    await waitFor('five periods to pass while the read is held', () => Date.now() - heldAt >= 5 * PERIOD_MS);
    expect(reads).toBe(1);
    gate = undefined;
    release();
    await waitFor('the second call to hear from the poll', () => b.seen.length > 0);
    expect(a.seen[0]).toEqual({ reads: 1, ids: [ended[0]] });
    expect(b.seen[0].ids).toEqual([ended[1]]);
    expect(b.seen[0].reads).toBeGreaterThan(1);
    expect(mostInFlight).toBe(1);
  });

  it('a failed read fails the calls it polled; the next read is a new one', async () => {
    failNext = true;
    const a = watch([ended[0]]);
    const b = watch([ended[1]]);
    await waitFor('both calls to hear of the failure', () => a.failures.length > 0 && b.failures.length > 0);
    expect(a.failures[0]).toEqual(new Error('store unreachable'));
    expect(b.failures[0]).toEqual(new Error('store unreachable'));
    await waitFor('the next read to find the runs', () => a.seen.length > 0 && b.seen.length > 0);
    expect(a.seen[0]).toEqual({ reads: 2, ids: [ended[0]] });
    expect(b.seen[0]).toEqual({ reads: 2, ids: [ended[1]] });
  });
});
