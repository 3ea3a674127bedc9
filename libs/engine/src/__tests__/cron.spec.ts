import { EngineError } from '@ironflow/contracts';
import { StoreClock } from '@ironflow/store';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { readAudit, registerPull, schedulerPeers, settle } from './engine-kit.test';

/**
 * Cron triggers (issue 9, item 1): the scheduler's cron pass starts one run per function and tick,
 * whatever number of schedulers run it (the tick's event id is derived from the function and the
 * tick), fires every tick of a late pass, and collapses ticks missed while no scheduler ran into
 * one run. Time is the store clock moved by the test, passes are called directly.
 */
describe.each(STORES)('cron triggers [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { cronCatchUpMs: 60_000 });
  });
  afterEach(() => t.close());

  const nextAt = async (functionId: string): Promise<number | null> => {
    const rows = await t.db.store.read('test.schedule', (tx) => tx.query<{ next_at: unknown }>(`SELECT next_at FROM cron_schedules WHERE function_id = $1`, [functionId]));
    return rows.length ? Number(rows[0].next_at) : null;
  };
  /** The ticks (ms) whose runs `functionId` has, one entry per run, in tick order. */
  const ticksRun = async (functionId: string): Promise<number[]> => {
    const rows = await t.db.store.read('test.cronRuns', (tx) =>
      tx.query<{ data: string }>(`SELECT e.data FROM runs r JOIN events e ON e.id = r.event_id WHERE r.function_id = $1`, [functionId]),
    );
    return rows.map((r) => Date.parse((JSON.parse(r.data) as { scheduledAt: string }).scheduledAt)).sort((a, b) => a - b);
  };
  /** Moves every clock in `clocks` to `at` on the first one's reading. */
  const moveTo = (at: number, clocks: StoreClock[] = [t.db.clock]) => {
    const by = at - clocks[0].now();
    for (const c of clocks) c.advance(by);
  };

  it('registration refuses an invalid schedule, naming the trigger and why, and registers nothing', async () => {
    for (const [cron, why] of [['61 * * * *', 'minute'], ['CRON_TZ=Nowhere/City 0 9 * * *', 'unknown time zone'], ['0 0 30 2 *', 'never fires']]) {
      const err = await t.engine.api.registerFunction(SCOPE, { id: 'nightly', mode: 'pull', triggers: [{ event: 'x' }, { cron }] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EngineError);
      expect((err as EngineError).code).toBe('VALIDATION_ERROR');
      expect((err as EngineError).message).toContain('triggers.1.cron');
      expect((err as EngineError).message).toContain(why);
    }
    const err = await t.engine.api.registerFunction(SCOPE, { id: 'nightly', mode: 'pull', triggers: [{ cron: '0 9 * * *', expression: 'true' }] }).catch((e: unknown) => e);
    expect((err as EngineError).message).toContain('triggers.0.expression');
    expect(await t.engine.api.listFunctions(SCOPE)).toEqual([]);
    expect(await nextAt('nightly')).toBeNull();
  });

  it('starts one run per tick, whose event carries the trigger event name and the tick, with its run.created row', async () => {
    // Just past a tick, so real time cannot reach the next one before the 'not due yet' pass.
    moveTo(Math.ceil(t.db.clock.now() / 10_000) * 10_000 + 1);
    await registerPull(t, { id: 'cleanup', triggers: [{ cron: '*/10 * * * * *', event: 'scheduled.cleanup' }] });
    const first = (await nextAt('cleanup'))!;
    expect(first % 10_000).toBe(0);
    expect(first).toBeGreaterThan(t.db.clock.now() - 1000);
    expect(await t.engine.cron.pass()).toBe(0); // not due yet
    moveTo(first);
    expect(await t.engine.cron.pass()).toBe(1);
    expect(await t.engine.cron.pass()).toBe(0);
    expect(await nextAt('cleanup')).toBe(first + 10_000);
    moveTo(first + 10_000);
    expect(await t.engine.cron.pass()).toBe(1);
    expect(await ticksRun('cleanup')).toEqual([first, first + 10_000]);

    const { runs } = await t.engine.api.listRuns(SCOPE, { functionId: 'cleanup' });
    const run = runs.find((r) => (r.input as { scheduledAt: string }).scheduledAt === new Date(first).toISOString())!;
    expect(run.input).toEqual({ cron: '*/10 * * * * *', timezone: 'UTC', scheduledAt: new Date(first).toISOString() });
    const event = await t.db.store.read('test.event', (tx) => tx.query<{ name: string }>(`SELECT name FROM events WHERE id = $1`, [run.eventId]));
    expect(event[0].name).toBe('scheduled.cleanup');
    await settle(t);
    expect(await readAudit(t, run.id, 'run.created')).toHaveLength(1);
  });

  it('fires every tick a late pass finds within the catch-up window (no gap), and one run for ticks missed past it', async () => {
    // Ticks 10 s apart, so the test's own running time (the clock moves on) cannot add a tick.
    await registerPull(t, { id: 'every-ten', triggers: [{ cron: '*/10 * * * * *' }] });
    const first = (await nextAt('every-ten'))!;
    moveTo(first + 35_000);
    expect(await t.engine.cron.pass()).toBe(4);
    expect(await ticksRun('every-ten')).toEqual([first, first + 10_000, first + 20_000, first + 30_000]);

    // No scheduler for ten minutes: the missed ticks collapse into one run, for the latest of them.
    moveTo(first + 635_000);
    expect(await t.engine.cron.pass()).toBe(1);
    expect((await ticksRun('every-ten')).slice(4)).toEqual([first + 630_000]);
    expect(await nextAt('every-ten')).toBe(first + 640_000);
  });

  it('three schedulers on one store start exactly one run per tick over 30 ticks: no duplicate, no gap', async () => {
    const { engines, clocks, stop } = await schedulerPeers(t, 2);
    await registerPull(t, { id: 'heartbeat', triggers: [{ cron: '* * * * * *' }] });
    const first = (await nextAt('heartbeat'))!;
    for (let i = 0; i < 30; i++) {
      moveTo(first + i * 1000 + 200, clocks);
      // A pass that meets a schedule another holds skips it (SKIP LOCKED) or finds it advanced.
      await Promise.all(engines.map((e) => e.cron.pass()));
    }
    await stop();
    // Every tick from the first on, once, in a row; the clock also moved by the test's own running
    // time, so later ticks may have fired too.
    const ticks = await ticksRun('heartbeat');
    expect(ticks.length).toBeGreaterThanOrEqual(30);
    expect(ticks).toEqual(ticks.map((_t, i) => first + i * 1000));
  });

  it('reads the schedule in the time zone of its CRON_TZ= prefix', async () => {
    await registerPull(t, { id: 'standup', triggers: [{ cron: 'CRON_TZ=America/New_York 30 9 * * *' }] });
    const at = (await nextAt('standup'))!;
    const inNewYork = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }).format(at);
    expect(inNewYork).toBe('09:30:00');
    expect(at).toBeGreaterThan(t.db.clock.now());
    expect(at - t.db.clock.now()).toBeLessThanOrEqual(25 * 3600_000);
  });

  it('re-registering unchanged keeps a due tick; a changed schedule takes its own; no cron trigger left drops it', async () => {
    const triggers = [{ cron: '0 * * * *' }];
    await registerPull(t, { id: 'hourly', triggers });
    const first = (await nextAt('hourly'))!;
    moveTo(first + 500);
    await registerPull(t, { id: 'hourly', triggers }); // a worker restarting registers again
    expect(await nextAt('hourly')).toBe(first);
    expect(await t.engine.cron.pass()).toBe(1);

    await registerPull(t, { id: 'hourly', triggers: [{ cron: '30 * * * *' }] });
    expect(await nextAt('hourly')).toBe(first + 30 * 60_000);
    await registerPull(t, { id: 'hourly', triggers: [{ event: 'manual.run' }] });
    expect(await nextAt('hourly')).toBeNull();
  });

  it("a cron trigger's event only names its ticks' event: emitting that name starts no run", async () => {
    await registerPull(t, { id: 'cleanup', triggers: [{ cron: '0 3 * * *', event: 'scheduled.cleanup' }] });
    expect((await t.engine.api.trigger(SCOPE, { event: 'scheduled.cleanup', data: {} })).runIds).toEqual([]);
  });
});
