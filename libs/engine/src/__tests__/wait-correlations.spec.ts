import { correlationsSql } from '@ironflow/store';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, readRun, readStep, registerPull, registerWorker, snapshot, stepId } from './engine-kit.test';

/**
 * A `waitForEvent` yield records a correlation (DESIGN.md `waiting_correlations`: run_id, step_id,
 * event name, match, satisfied) that every later trigger of that event name reads. A wait that
 * ends without its event — it timed out, or its run was cancelled — must close its correlation;
 * otherwise the open set for an event name only ever grows and every trigger of that name reads
 * all of it.
 *
 * Regression: this was a bug (found by these tests, then fixed): nothing but a matching event
 * closed a correlation; scheduler-system.ts `timeOut` ended the step and failed the run without
 * closing it, and cancel-system.ts `cancel` left the run's open correlations as they were.
 */
describe.each(STORES)('waitForEvent correlations [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerWorker(t, ['flow']);
  });
  afterEach(() => t.close());

  const openFor = (eventName: string) =>
    t.db.store.unitOfWork('test.openCorrelations', (tx) => correlationsSql.listOpenCorrelations(tx, SCOPE.project, SCOPE.env, eventName));

  async function waitingForPayment(orderId: string, match = 'data.orderId'): Promise<string> {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { orderId } });
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(runIds[0]);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, {
      status: 'yielded',
      yield: { type: 'wait_for_event', step_id: stepId(runIds[0], 'paid'), event_filter: { event: 'order.paid', match, timeout: '1m' } },
    }));
    expect((await readRun(t, runIds[0])).status).toBe('waiting');
    return runIds[0];
  }

  it('a satisfied wait closes its correlation', async () => {
    const runId = await waitingForPayment('A');
    expect((await openFor('order.paid')).map((c) => c.runId)).toEqual([runId]);
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A' } });
    expect(await openFor('order.paid')).toEqual([]);
  });

  it.each(['orderId', 'event.data.orderId'])('a match path %s reads the data as `data.orderId` does: the event of its order satisfies the wait, another order\'s does not', async (match) => {
    const runA = await waitingForPayment('A', match);
    const runB = await waitingForPayment('B', match);
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A' } });
    expect((await readRun(t, runA)).status).toBe('waiting_for_capacity');
    expect((await readRun(t, runB)).status).toBe('waiting');
    expect((await openFor('order.paid')).map((c) => c.runId)).toEqual([runB]);
  });

  it('a wait that timed out fails its run with EVENT_WAIT_TIMED_OUT and closes its correlation', async () => {
    const runId = await waitingForPayment('A');
    t.db.clock.advance(61_000);
    await t.engine.scheduler.timeoutSweep();
    expect(await readRun(t, runId)).toMatchObject({ status: 'failed', error: { code: 'EVENT_WAIT_TIMED_OUT' } });
    expect(await readStep(t, runId, stepId(runId, 'paid'))).toMatchObject({ status: 'timed_out' });
    expect(await openFor('order.paid')).toEqual([]);
  });

  it('a cancelled run’s wait closes its correlation', async () => {
    const runId = await waitingForPayment('A');
    expect((await t.engine.api.cancelRun(SCOPE, runId, 'stop')).status).toBe('cancelled');
    expect(await openFor('order.paid')).toEqual([]);
  });

  it('a late matching event changes nothing on a run whose wait timed out or that was cancelled', async () => {
    const timedOut = await waitingForPayment('A');
    const cancelled = await waitingForPayment('B');
    expect((await t.engine.api.cancelRun(SCOPE, cancelled, 'stop')).status).toBe('cancelled');
    t.db.clock.advance(61_000);
    await t.engine.scheduler.timeoutSweep();
    const before = [await snapshot(t, timedOut), await snapshot(t, cancelled)];
    expect(before.map((s) => s.run.status)).toEqual(['failed', 'cancelled']);

    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'A' } });
    await t.engine.api.trigger(SCOPE, { event: 'order.paid', data: { orderId: 'B' } });
    expect([(await snapshot(t, timedOut)).run, (await snapshot(t, cancelled)).run]).toEqual(before.map((s) => s.run));
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
  });
});
