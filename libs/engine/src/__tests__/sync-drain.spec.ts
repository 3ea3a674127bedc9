import { SCOPE, STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { countRows, registerPull } from './engine-kit.test';

/**
 * Sync calls during a drain (`Engine.stop`, README "Shutdown"): a TriggerSync waiting on a run
 * that cannot end answers `UNAVAILABLE` naming the run by the drain deadline; a sync call that
 * arrives during the drain is refused before it writes anything.
 */
describe.each(STORES)('sync calls during a drain [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
  });
  afterEach(() => t.close());

  it('a TriggerSync in flight answers UNAVAILABLE naming its run and event at the drain deadline', async () => {
    const waiting = t.engine.api.triggerSync(SCOPE, { event: 'order.placed', data: {}, timeoutMs: 60_000 }).catch((err: unknown) => err);
    // No worker polls: the run stays queued until the drain ends the wait.
    await waitFor('the run to be created', async () => (await countRows(t, 'runs')) === 1);
    const stopping = t.engine.stop(300);
    const err = await waiting;
    await stopping;
    await expectDrainedError(t, err);
  });

  // A timer runs on the monotonic clock: the drain deadline's may run while the wall clock still
  // reads up to a millisecond before the deadline (measured), more when it was stepped back. Here
  // it reads 5 s before, so a call that compared `Date.now()` with the deadline would wait on
  // until its own deadline (20 s) and answer with its run as it stands instead.
  it('a TriggerSync waiting answers UNAVAILABLE at the drain deadline\'s timer while the wall clock reads before the deadline', async () => {
    const waiting = t.engine.api.triggerSync(SCOPE, { event: 'order.placed', data: {}, timeoutMs: 20_000 }).catch((err: unknown) => err);
    await waitFor('the run to be created', async () => (await countRows(t, 'runs')) === 1);
    const stopping = t.engine.stop(300);
    const err = await withWallClockBack(5_000, () => waiting);
    await stopping;
    await expectDrainedError(t, err);
  });

  it('a TriggerSync whose trigger commits after the drain deadline passed answers UNAVAILABLE naming its run', async () => {
    let committed!: () => void;
    const held = new Promise<void>((resolve) => (committed = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // The trigger's unit is held after its commit, before the call has its run ids: the deadline's
    // wake finds no wait to end, and the clock read after it is 5 s behind.
    t.faults.afterCommit((name) => name === 'trigger', () => {
      committed();
      return released;
    });
    const waiting = t.engine.api.triggerSync(SCOPE, { event: 'order.placed', data: {}, timeoutMs: 20_000 }).catch((err: unknown) => err);
    await held;
    const stopping = t.engine.stop(300);
    await waitFor('the drain deadline to pass', () => t.engine.api.syncWaits.deadlinePassed);
    const err = await withWallClockBack(5_000, () => {
      release();
      return waiting;
    });
    await stopping;
    await expectDrainedError(t, err);
  });

  it('a sync call that arrives during the drain is refused with UNAVAILABLE and starts nothing', async () => {
    await t.engine.stop(200);
    await expect(t.engine.api.triggerSync(SCOPE, { event: 'order.placed', data: {} })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(t.engine.api.invokeFunctionSync(SCOPE, { functionId: 'flow', input: {} })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await countRows(t, 'runs')).toBe(0);
    expect(await countRows(t, 'events')).toBe(0);
  });
});

/** `err` is the drain's `UNAVAILABLE` naming the one run (queued, no worker) and its event. */
async function expectDrainedError(t: TestEngine, err: unknown): Promise<void> {
  const [run] = await t.db.store.read('testRuns', (tx) => tx.query<{ id: string; event_id: string }>('SELECT id, event_id FROM runs'));
  const drained = err as { code?: string; message?: string; details?: unknown };
  expect(drained.code).toBe('UNAVAILABLE');
  expect(drained.message).toContain(`run ${run.id} (flow) is waiting_for_capacity`);
  expect(drained.details).toEqual({ runIds: [run.id], eventId: run.event_id });
}

/** Runs `during` with the wall clock (`Date.now`) reading `ms` earlier, as after an NTP step back; the clock is restored after it. */
async function withWallClockBack<T>(ms: number, during: () => Promise<T>): Promise<T> {
  const now = Date.now.bind(Date);
  const clock = jest.spyOn(Date, 'now').mockImplementation(() => now() - ms);
  try {
    return await during();
  } finally {
    clock.mockRestore();
  }
}
