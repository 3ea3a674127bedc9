/**
 * Sleeps follow the engine's clock (issue 7 item 10; README "Sleeps and clocks"): a worker whose
 * clock is 10 minutes ahead must not park a 2 s sleep for 10 minutes. The engine places `until`
 * with the report's own times against its receive time: a report's `sent_at` corrects it; a
 * worker time it has seen (a step's `ended_at`, in the report or checkpointed by the execution)
 * bounds it; with neither it is taken as sent. Both stores.
 */
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { sleepWakeAt } from '../sleep-clock';
import { WORKER, fenced, pollAndAck, ranStep, readStep, registerPull, registerWorker, stepId } from './engine-kit.test';

const TEN_MINUTES = 10 * 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

describe.each(STORES)('sleeps and worker clocks [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'f', triggers: [{ event: 'go' }] });
    await registerWorker(t, ['f']);
  });
  afterEach(() => t.close());

  async function started() {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    return { runId, job: await pollAndAck(t) };
  }

  /** The stored wake time of the run's `nap` sleep, relative to the store clock now. */
  async function wakeIn(runId: string): Promise<number> {
    const step = await readStep(t, runId, stepId(runId, 'nap'));
    return (step.wakeAt as number) - t.db.clock.now();
  }

  it('a worker 10 min ahead that sends sent_at: a 2 s sleep wakes 2 s after receipt, and the sleep sweep runs it then', async () => {
    const { runId, job } = await started();
    const workerNow = t.db.clock.now() + TEN_MINUTES;
    await t.engine.pull.update(WORKER, job.job_id, { ...fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until: iso(workerNow + 2_000) } }), sent_at: iso(workerNow) });
    const left = await wakeIn(runId);
    expect(left).toBeLessThanOrEqual(2_000);
    expect(left).toBeGreaterThan(0);
    expect(await t.engine.scheduler.sleepSweep()).toBe(0);
    t.db.clock.advance(2_001);
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
  });

  it('a worker 10 min behind that sends sent_at: its 2 s sleep still lasts 2 s (not due at once)', async () => {
    const { runId, job } = await started();
    const workerNow = t.db.clock.now() - TEN_MINUTES;
    await t.engine.pull.update(WORKER, job.job_id, { ...fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until: iso(workerNow + 2_000) } }), sent_at: iso(workerNow) });
    expect(await wakeIn(runId)).toBeGreaterThan(1_000);
    expect(await t.engine.scheduler.sleepSweep()).toBe(0);
  });

  it('a v0.29 REST worker 10 min ahead (no sent_at): the ended_at of the steps it checkpointed bounds the sleep', async () => {
    const { runId, job } = await started();
    const workerNow = t.db.clock.now() + TEN_MINUTES;
    const step = { ...ranStep(runId, 'a', 1), started_at: iso(workerNow - 5), ended_at: iso(workerNow) };
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'progress', steps: [step], step_offset: 0 }));
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until: iso(workerNow + 2_000) } }));
    const left = await wakeIn(runId);
    expect(left).toBeLessThanOrEqual(2_000);
    t.db.clock.advance(2_001);
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
  });

  it('a push-style report 10 min ahead with steps in the same report: their ended_at bounds the sleep', async () => {
    const { runId, job } = await started();
    const workerNow = t.db.clock.now() + TEN_MINUTES;
    const step = { ...ranStep(runId, 'a', 1), ended_at: iso(workerNow) };
    await t.engine.reports.apply(runId, { executionSeq: job.execution_seq!, leaseToken: job.lease_token! }, { kind: 'yielded', steps: [step], yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until: iso(workerNow + 2_000) } });
    expect(await wakeIn(runId)).toBeLessThanOrEqual(2_000);
  });

  it('with no worker time at all, until is taken as sent; a step time that says "behind" changes nothing', async () => {
    const { runId, job } = await started();
    const until = t.db.clock.now() + 60_000;
    const step = { ...ranStep(runId, 'a', 1), ended_at: iso(t.db.clock.now() - 30_000) };
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'progress', steps: [step], step_offset: 0 }));
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until: iso(until) } }));
    expect((await readStep(t, runId, stepId(runId, 'nap'))).wakeAt).toBe(until);
  });
});

describe('sleepWakeAt', () => {
  const now = 1_700_000_000_000;
  it('corrects with sent_at, bounds with a known lead, else keeps until', () => {
    expect(sleepWakeAt(now + TEN_MINUTES + 2_000, now, { sentAt: now + TEN_MINUTES })).toBe(now + 2_000);
    expect(sleepWakeAt(now + TEN_MINUTES + 2_000, now, { aheadAtLeastMs: TEN_MINUTES - 50 })).toBe(now + 2_050);
    expect(sleepWakeAt(now + 2_000, now, { aheadAtLeastMs: -5_000 })).toBe(now + 2_000);
    expect(sleepWakeAt(now + 2_000, now, {})).toBe(now + 2_000);
    expect(sleepWakeAt(8e15, now, { sentAt: -8e15 })).toBe(8.64e15);
  });
});
