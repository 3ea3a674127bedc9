import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, readRun, readStep, registerPull, registerWorker, stepId } from './engine-kit.test';

/**
 * The timeout sweep must make progress past rows it will never act on (DESIGN.md principle 5,
 * "Every loop makes progress past a bad row"). A run cancelled while it waits in
 * `waitForEvent` or `step.invoke` keeps its step `waiting` with a `timeout_at`; once that passes,
 * the sweep reads the step every tick and, finding the run terminal, leaves it as it is. With a
 * page (`passPageSize`) of such steps, a live wait behind them never times out.
 *
 * Regression test: this was a bug (found by this test, then fixed in the working tree): in
 * libs/engine/src/scheduler-system.ts `timeOut`, `if (!run || run.status !== 'waiting') return null;`
 * returned before `endWaitingStep`, so the dead step stayed due forever and
 * `listDueTimeouts` (ORDER BY timeout_at LIMIT page) handed the
 * same rows back on every tick.
 */
describe.each(STORES)('timeout sweep [%s]', (dialect) => {
  const PAGE = 2;
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { passPageSize: PAGE });
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerPull(t, { id: 'child' });
    await registerWorker(t, ['flow']); // the child is never run: its parent's invoke times out
  });
  afterEach(() => t.close());

  const waits = {
    wait_for_event: (runId: string) => ({ type: 'wait_for_event' as const, step_id: stepId(runId, 'paid'), event_filter: { event: 'order.paid', match: 'data.orderId', timeout: '1m' } }),
    invoke_function: (runId: string) => ({ type: 'invoke_function' as const, step_id: stepId(runId, 'child'), function_id: 'child', input: {}, invoke_timeout_ms: 60_000 }),
  };

  async function waitingRun(kind: keyof typeof waits, orderId: string): Promise<string> {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { orderId } });
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(runIds[0]);
    expect((await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: waits[kind](runIds[0]) }))).effect).toBe('waiting');
    return runIds[0];
  }

  it.each(Object.keys(waits) as (keyof typeof waits)[])(
    'a live %s timeout is reached behind a full page of waits of cancelled runs',
    async (kind) => {
      const cancelled: string[] = [];
      for (let i = 0; i < PAGE; i++) {
        const runId = await waitingRun(kind, `dead-${i}`);
        expect((await t.engine.api.cancelRun(SCOPE, runId, 'gone')).status).toBe('cancelled');
        cancelled.push(runId);
      }
      t.db.clock.advance(1000); // the live wait's timeout is strictly later than the dead ones'
      const live = await waitingRun(kind, 'live');

      t.db.clock.advance(61_000);
      for (let tick = 0; tick < 3; tick++) await t.engine.scheduler.timeoutSweep();

      const run = await readRun(t, live);
      expect(run.status).toBe('failed');
      expect(run.error?.code).toBe(kind === 'invoke_function' ? 'INVOKE_FAILED' : 'EVENT_WAIT_TIMED_OUT');
      // The cancelled runs stay cancelled whatever the sweep does with their steps.
      for (const runId of cancelled) expect((await readRun(t, runId)).status).toBe('cancelled');
    },
  );

  it('a cancelled run’s due timeout does not fail or queue it', async () => {
    const runId = await waitingRun('wait_for_event', 'A');
    expect((await t.engine.api.cancelRun(SCOPE, runId, 'gone')).status).toBe('cancelled');
    const before = await readRun(t, runId);
    t.db.clock.advance(61_000);
    await t.engine.scheduler.timeoutSweep();
    expect(await readRun(t, runId)).toEqual(before);
    expect(['waiting', 'timed_out']).toContain((await readStep(t, runId, stepId(runId, 'paid'))).status);
  });
});
