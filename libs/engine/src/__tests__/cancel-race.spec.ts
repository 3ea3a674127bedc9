import { EngineError, JobUpdateBody } from '@ironflow/contracts';
import { toRunView } from '@ironflow/engine';
import { SCOPE, STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import {
  WORKER,
  fenced,
  outcomesAnnounced,
  pollAndAck,
  ranStep,
  readLeases,
  readRun,
  readSteps,
  recordRunEvents,
  registerPull,
  registerWorker,
  settle,
} from './engine-kit.test';

/**
 * "A cancel and a completion that race are decided by the same row. Whichever commits first wins,
 * and the other changes nothing and announces nothing" (specification, "A late or repeated report
 * does not change the outcome"). Each order is forced with a pause point between the first
 * writer's read and its write; the second writer is started while the first is held.
 */
describe.each(STORES)('cancel vs outcome race [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerWorker(t, ['flow']);
  });
  afterEach(() => t.close());

  /**
   * On PostgreSQL the second writer must really be queued behind the first one's row lock before
   * the first is released: a waiter on a row lock holds a heavyweight tuple lock on `runs` (this
   * suite's schema). On SQLite the second unit of work is queued on the store's mutex as soon as
   * it is called, so there is nothing to wait for.
   */
  async function secondWriterIsBlocked(): Promise<void> {
    if (dialect !== 'postgres') return;
    await waitFor('a writer waiting on the run row lock', async () => {
      const rows = await t.db.store.read('test.locks', (tx) =>
        tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'tuple' AND relation = 'runs'::regclass`),
      );
      return Number(rows[0].n) >= 1;
    });
  }

  async function startRunning() {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { orderId: 'A' } });
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(runIds[0]);
    return { runId: runIds[0], job };
  }

  const outcomes: ['completed' | 'failed', (runId: string) => Omit<JobUpdateBody, 'execution_seq' | 'lease_token'>][] = [
    ['completed', (runId) => ({ status: 'completed', output: { shipped: true }, steps: [ranStep(runId, 'ship', 'ok')], step_offset: 0 })],
    ['failed', (runId) => ({ status: 'failed', error: { message: 'card declined', code: 'NON_RETRYABLE', retryable: false }, steps: [ranStep(runId, 'ship', 'ok')], step_offset: 0 })],
  ];

  describe.each(outcomes)('%s report', (status, body) => {
    it(`cancel first: the cancel stands; the ${status} report is RUN_NOT_RUNNING and changes nothing`, async () => {
      const { runId, job } = await startRunning();
      const events = recordRunEvents(t);

      const held = t.gate.arm('cancel.afterRead', runId);
      const cancel = t.engine.api.cancelRun(SCOPE, runId, 'user cancel');
      await held.reached;
      const report = t.engine.pull.update(WORKER, job.job_id, fenced(job, body(runId))).then(
        (r) => r,
        (err: unknown) => err,
      );
      await secondWriterIsBlocked();
      held.release();

      const view = await cancel;
      const answer = await report;
      expect(view).toMatchObject({ status: 'cancelled', error: { code: 'CANCELLED', message: 'user cancel' } });
      expect(answer).toBeInstanceOf(EngineError);
      expect(answer).toMatchObject({ code: 'RUN_NOT_RUNNING', httpStatus: 409 });

      // The row is exactly what the cancel committed: one terminal write (claim = 2, terminal = 3),
      // no output, and none of the losing report's steps.
      const run = await readRun(t, runId);
      expect(toRunView(run)).toEqual(view);
      expect(run).toMatchObject({ status: 'cancelled', version: 3, output: null });
      expect(await readSteps(t, runId)).toEqual([]);
      expect(await readLeases(t, runId)).toEqual([]);

      await settle(t);
      expect(await outcomesAnnounced(t.engine)).toBe(1);
      expect(await outcomesAnnounced(t.engine, 'cancelled')).toBe(1);
      expect(events.subjects).toEqual([`public.default.system.run.${runId}.cancelled`]);
      events.stop();
    });

    it(`${status} report first: the ${status} outcome stands; the cancel changes nothing and answers ${status}`, async () => {
      const { runId, job } = await startRunning();
      const events = recordRunEvents(t);

      const held = t.gate.arm('report.afterRead', runId);
      const report = t.engine.pull.update(WORKER, job.job_id, fenced(job, body(runId)));
      await held.reached;
      const cancel = t.engine.api.cancelRun(SCOPE, runId, 'user cancel').then(
        (v) => v,
        (err: unknown) => err,
      );
      await secondWriterIsBlocked();
      held.release();

      const result = await report;
      const view = await cancel;
      expect(result.effect).toBe('outcome');
      expect(result.run.status).toBe(status);

      // The cancel's answer says which outcome stands.
      expect(view).toEqual(toRunView(result.run));
      expect(view).toMatchObject({ status });

      // The row is exactly what the report committed.
      const run = await readRun(t, runId);
      expect(run).toEqual(result.run);
      expect(run.version).toBe(3);
      if (status === 'completed') expect(run).toMatchObject({ output: { shipped: true }, error: null });
      else expect(run).toMatchObject({ output: null, error: { message: 'card declined', code: 'NON_RETRYABLE', retryable: false } });
      expect((await readSteps(t, runId)).map((s) => [s.name, s.status, s.output])).toEqual([['ship', 'completed', 'ok']]);
      expect(await readLeases(t, runId)).toEqual([]);

      await settle(t);
      expect(await outcomesAnnounced(t.engine)).toBe(1);
      expect(await outcomesAnnounced(t.engine, status)).toBe(1);
      expect(events.subjects).toEqual([`public.default.system.run.${runId}.${status}`]);
      events.stop();
    });
  });
});
