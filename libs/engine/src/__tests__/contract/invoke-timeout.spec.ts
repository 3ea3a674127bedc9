import { STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { ParentWaiting, endChild, parentWaitingOnChild, readRun, readStep, registerParentAndChild } from './post-commit-kit';

/** The invoke timeout of the kit's `step.invoke` (the report's default, ms). */
const INVOKE_TIMEOUT_MS = 30_000;
const DAY_MS = 86_400_000;

/**
 * The timeout sweep and an ended child (specification, "The timeout sweep leaves out an invoke
 * step whose child has ended, for up to 24 hours past its deadline, and the waiting-run pass does
 * not time one out either"): a late wake does not become a failed parent, while an invoke whose
 * child still runs times out as before, and past the grace an ended child's step times out (how a
 * parent ends when its wake can never land). On SQLite and PostgreSQL.
 */
describe.each(STORES)('invoke timeout and an ended child [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect, { followUpDrainMs: 1000 });
    await registerParentAndChild(t, 'push');
  });
  afterEach(() => t.close());

  /** A parent whose child completed and whose wake was lost (the node died after the child's commit). */
  async function endedChildWakeLost(): Promise<ParentWaiting> {
    const lost = jest.spyOn(t.engine.wakes, 'wakeParent').mockResolvedValue(undefined);
    try {
      const waiting = await parentWaitingOnChild(t, 'push');
      await endChild(t.engine, t.scope, waiting.childId, 'completed');
      return waiting;
    } finally {
      lost.mockRestore();
    }
  }

  it('TestPostCommit_InvokeTimeoutHonoursEndedChild: the sweep leaves out the ended child\'s step and times out the one whose child runs; the pass applies the child\'s outcome', async () => {
    const ended = await endedChildWakeLost();
    const running = await parentWaitingOnChild(t, 'push'); // its child is queued, never claimed
    t.db.clock.advance(INVOKE_TIMEOUT_MS + 1);

    expect(await t.engine.scheduler.timeoutSweep()).toBe(1);
    expect(await readStep(t, running.parentId, running.stepId)).toMatchObject({ status: 'timed_out' });
    expect(await readRun(t, running.childId)).toMatchObject({ status: 'cancelled', error: { code: 'INVOKE_TIMED_OUT' } });
    expect(await readRun(t, running.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(await readStep(t, ended.parentId, ended.stepId)).toMatchObject({ status: 'waiting' });
    expect(await readRun(t, ended.parentId)).toMatchObject({ status: 'waiting' });

    // Later sweeps still leave it alone; the waiting-run pass wakes it with the child's outcome.
    t.db.clock.advance(60_000);
    expect(await t.engine.scheduler.timeoutSweep()).toBe(0);
    expect(await t.engine.wakes.waitingRunPass()).toBeGreaterThanOrEqual(1);
    await t.engine.resources.followUps.drain(10_000);
    expect(await readStep(t, ended.parentId, ended.stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await readRun(t, ended.parentId)).toMatchObject({ status: 'waiting_for_capacity', error: null });
    expect(await readRun(t, ended.childId)).toMatchObject({ status: 'completed', wakePending: false });
  });

  it('TestPostCommit_InvokeTimeoutHonoursEndedChild: past the 24 h grace an ended child\'s step times out, when its wake never landed', async () => {
    const ended = await endedChildWakeLost();
    t.db.clock.advance(INVOKE_TIMEOUT_MS + DAY_MS - 1000);
    expect(await t.engine.scheduler.timeoutSweep()).toBe(0);
    expect(await readStep(t, ended.parentId, ended.stepId)).toMatchObject({ status: 'waiting' });

    t.db.clock.advance(2000);
    expect(await t.engine.scheduler.timeoutSweep()).toBe(1);
    expect(await readStep(t, ended.parentId, ended.stepId)).toMatchObject({ status: 'timed_out' });
    expect(await readRun(t, ended.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    // The ended child keeps its own outcome.
    expect(await readRun(t, ended.childId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
  });
});
