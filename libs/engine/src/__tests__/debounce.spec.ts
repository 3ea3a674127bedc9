import { EngineError } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { countRows, readAudit, registerPull, schedulerPeers, settle } from './engine-kit.test';

/**
 * Debounce (issue 9, item 2; WIRE-PROTOCOL.md 5.3): the last event of a quiet period starts one
 * run, per key; `maxWaitMs` caps how long a window stays open; one run per window across several
 * schedulers; TriggerSync answers `FUNCTION_DEBOUNCED` (`failed_precondition`) and commits nothing.
 * Time is the store clock moved by the test, passes are called directly.
 */
describe.each(STORES)('debounce [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
  });
  afterEach(() => t.close());

  const emit = (data: Record<string, unknown>) => t.engine.api.trigger(SCOPE, { event: 'search.typed', data });
  /** The input of each run of `functionId`, oldest first. */
  const runInputs = async (functionId: string): Promise<unknown[]> => {
    const { runs } = await t.engine.api.listRuns(SCOPE, { functionId });
    return runs.reverse().map((r) => r.input);
  };

  it('registration refuses a period under 1000 ms and a maxWaitMs under the period, naming the field', async () => {
    for (const [debounce, field] of [[{ periodMs: 999 }, 'debounce.periodMs'], [{ periodMs: 2000, maxWaitMs: 1000 }, 'debounce.maxWaitMs']] as const) {
      const err = await t.engine.api.registerFunction(SCOPE, { id: 'search', mode: 'pull', triggers: [{ event: 'search.typed' }], debounce }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EngineError);
      expect((err as EngineError).code).toBe('VALIDATION_ERROR');
      expect((err as EngineError).message).toContain(field);
    }
    expect(await t.engine.api.listFunctions(SCOPE)).toEqual([]);
  });

  it('a burst of events starts one run, with the last event, once the period passed without another; per key', async () => {
    // Periods of 10 s keep the test's own running time (the clock also moves) out of the windows.
    await registerPull(t, { id: 'search', triggers: [{ event: 'search.typed' }], debounce: { periodMs: 10_000, key: 'data.user' } });
    for (const q of ['i', 'ir', 'iro']) {
      expect(await emit({ user: 'ada', q })).toMatchObject({ runIds: [], debouncedFunctionIds: ['search'] });
      t.db.clock.advance(6_000); // each event within the period of the one before
    }
    await emit({ user: 'bob', q: 'x' });
    expect(await t.engine.debounces.pass()).toBe(0); // 'iro' is 6 s old, 'x' new: both windows open
    t.db.clock.advance(4_000);
    expect(await t.engine.debounces.pass()).toBe(1); // ada's window closed
    expect(await runInputs('search')).toEqual([{ user: 'ada', q: 'iro' }]);
    t.db.clock.advance(6_000);
    expect(await t.engine.debounces.pass()).toBe(1); // bob's
    expect(await t.engine.debounces.pass()).toBe(0);
    expect(await runInputs('search')).toEqual([{ user: 'ada', q: 'iro' }, { user: 'bob', q: 'x' }]);
    expect(await countRows(t, 'events')).toBe(4); // every event is logged

    // An event after the window closed opens a new one.
    await emit({ user: 'ada', q: 'again' });
    t.db.clock.advance(10_000);
    expect(await t.engine.debounces.pass()).toBe(1);
    expect((await runInputs('search')).at(-1)).toEqual({ user: 'ada', q: 'again' });
  });

  it('maxWaitMs caps the window of events that never go quiet, and the next event opens a new one', async () => {
    await registerPull(t, { id: 'sensor', triggers: [{ event: 'search.typed' }], debounce: { periodMs: 10_000, maxWaitMs: 20_000 } });
    for (let i = 0; i < 4; i++) {
      await emit({ reading: i }); // at 0, 6, 12, 18 s: never 10 s quiet
      t.db.clock.advance(6_000);
    }
    // At 24 s: past the 20 s cap that the first event set, though the last is only 6 s old.
    expect(await t.engine.debounces.pass()).toBe(1);
    expect(await runInputs('sensor')).toEqual([{ reading: 3 }]);
    await emit({ reading: 4 });
    t.db.clock.advance(5_000);
    expect(await t.engine.debounces.pass()).toBe(0);
    t.db.clock.advance(5_000);
    expect(await t.engine.debounces.pass()).toBe(1);
    expect(await runInputs('sensor')).toEqual([{ reading: 3 }, { reading: 4 }]);
  });

  it('a window that several schedulers find closed starts exactly one run, with its run.created row', async () => {
    const { engines, clocks, stop } = await schedulerPeers(t, 2);
    await registerPull(t, { id: 'search', triggers: [{ event: 'search.typed' }], debounce: { periodMs: 1000, key: 'user' } });
    for (let round = 0; round < 5; round++) {
      await emit({ user: `u${round}`, q: 'a' });
      await emit({ user: `u${round}`, q: 'ab' });
      for (const c of clocks) c.advance(1000);
      await Promise.all(engines.map((e) => e.debounces.pass()));
    }
    const inputs = await runInputs('search');
    expect(inputs).toHaveLength(5);
    expect(new Set(inputs.map((i) => JSON.stringify(i)))).toEqual(new Set([0, 1, 2, 3, 4].map((r) => JSON.stringify({ user: `u${r}`, q: 'ab' }))));
    for (const e of engines) expect(await e.resources.followUps.drain(10_000)).toBe(true);
    const { runs } = await t.engine.api.listRuns(SCOPE, { functionId: 'search' });
    for (const run of runs) expect(await readAudit(t, run.id, 'run.created')).toHaveLength(1);
    await stop();
  });

  it('TriggerSync of an event that starts a debounced function answers FUNCTION_DEBOUNCED and commits nothing', async () => {
    await registerPull(t, { id: 'search', triggers: [{ event: 'search.typed' }], debounce: { periodMs: 1000 } });
    await registerPull(t, { id: 'audit-log', triggers: [{ event: 'search.typed' }] });
    const err = await t.engine.api.triggerSync(SCOPE, { event: 'search.typed', data: { q: 'x' }, timeoutMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).code).toBe('FUNCTION_DEBOUNCED');
    expect((err as EngineError).message).toContain('search');
    expect(await countRows(t, 'events')).toBe(0);
    expect(await countRows(t, 'runs')).toBe(0);
  });

  it('a trigger expression filters before the debounce: a refused event neither starts nor extends a window', async () => {
    await registerPull(t, { id: 'big-search', triggers: [{ event: 'search.typed', expression: 'size(event.data.q) > 2' }], debounce: { periodMs: 10_000 } });
    await emit({ q: 'abc' });
    t.db.clock.advance(5_000);
    await emit({ q: 'x' }); // refused by the expression: the window still closes 10 s after 'abc'
    t.db.clock.advance(5_000);
    expect(await t.engine.debounces.pass()).toBe(1);
    expect(await runInputs('big-search')).toEqual([{ q: 'abc' }]);
    await settle(t);
  });
});
