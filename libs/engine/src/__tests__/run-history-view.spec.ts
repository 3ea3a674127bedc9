/**
 * What `ironflow run get` reads, on both stores: each step's start and end (a `step.run`'s
 * `started_at` from the worker's report, else its `ended_at` − `duration_ms`; a wait starts when
 * it was recorded), and a user cancel's reason in the run's history.
 */
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, ranStep, registerPull, registerWorker, stepId } from './engine-kit.test';

describe.each(STORES)('run history view [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { leaseMs: 60_000 });
    await registerPull(t, { id: 'f', triggers: [{ event: 'go' }] });
    await registerWorker(t, ['f']);
  });
  afterEach(() => t.close());

  it('steps show when they started and ended; a cancel\'s reason is in the history', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    const steps = [
      { ...ranStep(runId, 'a', 1), started_at: '2026-01-01T00:00:01.000Z', ended_at: '2026-01-01T00:00:01.250Z' },
      { ...ranStep(runId, 'b', 2), ended_at: '2026-01-01T00:00:03.000Z', duration_ms: 500 },
    ];
    const sleepUntil = new Date(t.db.clock.now() + 60_000).toISOString();
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', steps, yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until: sleepUntil } }));
    await t.engine.api.cancelRun(SCOPE, runId, 'customer called');
    await t.engine.resources.followUps.drain(5_000);

    const { steps: views, history } = await t.engine.api.getRunSteps(SCOPE, runId);
    const byName = new Map(views.map((s) => [s.name, s]));
    expect(byName.get('a')).toMatchObject({ startedAt: '2026-01-01T00:00:01.000Z', endedAt: '2026-01-01T00:00:01.250Z' });
    expect(byName.get('b')).toMatchObject({ startedAt: '2026-01-01T00:00:02.500Z', endedAt: '2026-01-01T00:00:03.000Z' });
    const nap = byName.get('nap')!;
    expect(nap.startedAt).toBe(nap.createdAt);
    expect(history.filter((h) => h.eventType === 'run.cancelled')).toEqual([
      expect.objectContaining({ cause: 'user-cancel', data: expect.objectContaining({ error: expect.objectContaining({ message: 'customer called', code: 'CANCELLED' }) }) }),
    ]);
  });
});
