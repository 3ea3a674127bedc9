import { Engine } from '@ironflow/engine';
import { CrashingFollowUpTracker, STORES, TestEngine, faultsOf } from '@ironflow/testing';
import { cancelledUnclaimed, dispatchedUnclaimed, emitCancel, openAdmissionTest, reportInvoke } from './admission-kit';
import { readRun, readStep } from './post-commit-kit';

/**
 * The orphan sweep (specification, "An invoked child replays cancel_on and is read again before it
 * is dispatched", "Outcomes nobody announces"): held children whose admission a crash cut off are
 * found, a page a tick, in laps, and re-admitted after their replay, or cancelled from the event
 * log; a child whose replay fails is skipped and comes back. On SQLite and PostgreSQL, real NATS.
 */
describe.each(STORES)('orphan sweep [%s]', (dialect) => {
  let t: TestEngine;
  let crashing: CrashingFollowUpTracker;
  /** The engine that sweeps: a fresh node on the same store. */
  let sweeper: Engine;

  beforeEach(async () => {
    crashing = new CrashingFollowUpTracker();
    t = await openAdmissionTest(dialect, crashing);
    // Children whose replay this suite makes fail: `flaky` and `stuck` cancel on events of their own.
    await t.engine.api.registerFunction(t.scope, { id: 'flaky', mode: 'pull', cancelOn: [{ event: 'flaky.cancelled', match: 'data.orderId' }] });
    await t.engine.api.registerFunction(t.scope, { id: 'stuck', mode: 'pull', cancelOn: [{ event: 'stuck.cancelled', match: 'data.orderId' }] });
    // The node that reports dies after each commit: every child it creates is an orphan.
    crashing.crash();
    sweeper = await t.restart({ bus: 'nats' });
  });
  afterEach(() => t.close());

  /** Fails every event-log read of a replay for `eventName`; returns what heals that fault alone. */
  const failReplaysOf = (eventName: string) =>
    faultsOf(sweeper).fail({ query: (sql, params) => sql.includes('FROM events') && params.includes(eventName) });

  describe.each(['cancels it', 'leaves it when the read fails'] as const)('TestOrphanSweep_LinkedChildReplaysBeforeAdmission', (variant) => {
    it(`TestOrphanSweep_LinkedChildReplaysBeforeAdmission: the sweep replays a linked orphan from the event log and ${variant}`, async () => {
      const eventId = await emitCancel(t, 'A');
      const { parentId, childId, stepId } = await reportInvoke(t, 'A');
      if (variant === 'leaves it when the read fails') {
        const heal = failReplaysOf('order.cancelled');
        expect((await sweeper.orphans.run()).get(childId)).toBe('failed');
        expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true, executionSeq: 0 });
        heal();
      }
      expect((await sweeper.orphans.run()).get(childId)).toBe('ended');
      expect(await cancelledUnclaimed(t, childId)).toBe(true);
      expect(await readRun(t, childId)).toMatchObject({ error: { message: `cancel_on: order.cancelled ${eventId}` } });
      await sweeper.resources.followUps.drain(10_000);
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    });
  });

  it('TestOrphanSweep_PagesPastChildrenItCannotReplay: more than a page of children whose replay fails are never dispatched and do not hide a healthy orphan; the sweep comes back to them', async () => {
    sweeper.resources.config.passPageSize = 3;
    const flaky = [];
    for (const orderId of ['F1', 'F2', 'F3', 'F4']) flaky.push((await reportInvoke(t, orderId, { functionId: 'flaky' })).childId);
    const healthy = (await reportInvoke(t, 'H')).childId;
    const heal = failReplaysOf('flaky.cancelled');

    const first = await sweeper.orphans.run();
    expect([...first.keys()]).toEqual(flaky.slice(0, 3));
    expect([...first.values()]).toEqual(['failed', 'failed', 'failed']);
    const second = await sweeper.orphans.run();
    expect(Object.fromEntries(second)).toEqual({ [flaky[3]]: 'failed', [healthy]: 'dispatched' });
    expect(await dispatchedUnclaimed(t, healthy)).toBe(true);
    // Laps keep coming back; the failing children are never dispatched.
    for (let tick = 0; tick < 3; tick += 1) await sweeper.orphans.run();
    for (const id of flaky) expect(await readRun(t, id)).toMatchObject({ held: true, executionSeq: 0 });

    heal();
    for (let tick = 0; tick < 3 && !(await Promise.all(flaky.map((id) => dispatchedUnclaimed(t, id)))).every(Boolean); tick += 1) await sweeper.orphans.run();
    for (const id of flaky) expect(await dispatchedUnclaimed(t, id)).toBe(true);
  });

  describe.each(['settles', 'skips'] as const)('TestOrphanSweep_ComesBackToASkippedRunUnderSustainedArrivals', (arrivals) => {
    it(`TestOrphanSweep_ComesBackToASkippedRunUnderSustainedArrivals: with a full page of new orphans every tick, which the sweep ${arrivals}, it re-admits a child it skipped once the child recovers, after a revisit passed it`, async () => {
      sweeper.resources.config.passPageSize = 2;
      const skipped = (await reportInvoke(t, 'X', { functionId: 'flaky' })).childId;
      const healX = failReplaysOf('flaky.cancelled');
      failReplaysOf('stuck.cancelled');
      const visits: string[] = [];
      let next = 0;
      for (let tick = 0; tick < 30 && visits[visits.length - 1] !== 'dispatched'; tick += 1) {
        const outcomes = await sweeper.orphans.run();
        if (outcomes.has(skipped)) {
          visits.push(outcomes.get(skipped)!);
          // The child recovers only after a revisit has passed it by.
          if (visits.length === 2) healX();
        }
        // A full page of new orphans arrives before every tick.
        for (let i = 0; i < 2; i += 1) {
          next += 1;
          await reportInvoke(t, `N${next}`, { functionId: arrivals === 'settles' ? 'child' : 'stuck' });
        }
      }
      expect(visits.slice(0, 2)).toEqual(['failed', 'failed']);
      expect(visits[visits.length - 1]).toBe('dispatched');
      expect(await dispatchedUnclaimed(t, skipped)).toBe(true);
    });
  });
});
