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
    const err = (await waiting) as { code?: string; message?: string; details?: { runIds?: string[]; eventId?: string } };
    await stopping;
    const [run] = await t.db.store.read('testRuns', (tx) => tx.query<{ id: string; event_id: string }>('SELECT id, event_id FROM runs'));
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toContain(`run ${run.id} (flow) is waiting_for_capacity`);
    expect(err.details).toEqual({ runIds: [run.id], eventId: run.event_id });
  });

  it('a sync call that arrives during the drain is refused with UNAVAILABLE and starts nothing', async () => {
    await t.engine.stop(200);
    await expect(t.engine.api.triggerSync(SCOPE, { event: 'order.placed', data: {} })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(t.engine.api.invokeFunctionSync(SCOPE, { functionId: 'flow', input: {} })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await countRows(t, 'runs')).toBe(0);
    expect(await countRows(t, 'events')).toBe(0);
  });
});
