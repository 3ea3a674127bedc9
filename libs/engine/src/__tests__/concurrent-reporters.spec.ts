import { EngineError, RunView } from '@ironflow/contracts';
import { ReportResult, toRunView } from '@ironflow/engine';
import { SCOPE, TestEngine, openTestEngine } from '@ironflow/testing';
import {
  WORKER,
  fenced,
  outcomesAnnounced,
  pollAndAck,
  readLeases,
  readRun,
  readSteps,
  recordRunEvents,
  registerPull,
  registerWorker,
  settle,
  stepId,
} from './engine-kit.test';

/**
 * "Races are tested … with many concurrent reporters on PostgreSQL, asserting exactly one terminal
 * write" (DESIGN.md "Testing"). PostgreSQL only: SQLite runs units of work one at a time, so
 * there is no concurrency to test there. Every writer bumps `runs.version` once: insert = 1,
 * claim = 2, the one terminal write = 3; a second terminal write would make it 4.
 */
describe('concurrent reporters of one run [postgres]', () => {
  const REPORTERS = 50;
  const ROUNDS = 3;
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine('postgres');
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerWorker(t, ['flow']);
  });
  afterEach(() => t.close());

  async function startRunning() {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(runIds[0]);
    return { runId: runIds[0], job };
  }

  function answerOf(settled: PromiseSettledResult<unknown>): string {
    if (settled.status === 'fulfilled') return `effect:${(settled.value as ReportResult).effect}`;
    return settled.reason instanceof EngineError ? `error:${settled.reason.code}` : `unexpected:${String(settled.reason)}`;
  }

  /**
   * A claim must lock only the rows it takes: `FOR UPDATE SKIP LOCKED` makes every other claimer
   * skip what it holds, so a claimer that locks more than it claims hides work from the others.
   *
   * Regression: commit 9bbc134's libs/store/src/queries/runs.ts `claimRuns` read
   * `filter.limit + LANE_LOOKAHEAD` (limit + 50) candidates `FOR UPDATE SKIP LOCKED` and kept the
   * ones it passed over locked until its commit: one poll locked all 40 queued runs, claimed 5,
   * and the 9 concurrent polls got nothing. Claims now lock a batch of `limit` at a time.
   */
  it('concurrent polls by 10 workers claim each queued run exactly once', async () => {
    for (let w = 2; w <= 10; w++) await registerWorker(t, ['flow'], `w${w}`);
    const workers = [WORKER, ...Array.from({ length: 9 }, (_v, i) => `w${i + 2}`)];
    for (let i = 0; i < 40; i++) await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: { i } });

    const polls = await Promise.all(workers.map((w) => t.engine.pull.poll(w, 5)));
    const claimed = polls.flat();
    expect(claimed).toHaveLength(40);
    expect(new Set(claimed.map((j) => j.run_id)).size).toBe(40);
    expect(claimed.every((j) => j.execution_seq === 1)).toBe(true);
    // Each claimed run carries the lease of the worker that polled it, and nothing is left queued.
    for (const [i, jobs] of polls.entries()) {
      for (const job of jobs) expect(await readLeases(t, job.run_id)).toEqual([{ run_id: job.run_id, execution_seq: 1, holder: workers[i] }]);
    }
    expect(await t.engine.pull.poll(WORKER, 5)).toEqual([]);
  });

  it(`${REPORTERS} reporters of the same execution (completed and failed mixed) make exactly one terminal write`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { runId, job } = await startRunning();
      const announcedBefore = await outcomesAnnounced(t.engine);
      const events = recordRunEvents(t);
      const work = stepId(runId, 'work');
      const kinds = Array.from({ length: REPORTERS }, (_v, i) => (i % 2 === 0 ? 'completed' : 'failed'));

      const settled = await Promise.allSettled(
        kinds.map((kind, i) =>
          t.engine.pull.update(
            WORKER,
            job.job_id,
            fenced(job, kind === 'completed'
              ? { status: 'completed', output: { reporter: i }, steps: [{ id: work, name: 'work', type: 'invoke', status: 'completed', output: i }], step_offset: 0 }
              : { status: 'failed', error: { message: `reporter ${i}`, code: 'NON_RETRYABLE', retryable: false }, steps: [{ id: work, name: 'work', type: 'invoke', status: 'completed', output: i }], step_offset: 0 }),
          ),
        ),
      );
      const answers = settled.map(answerOf);
      const winners = answers.flatMap((a, i) => (a === 'effect:outcome' ? [i] : []));
      expect(winners).toHaveLength(1);
      const winner = winners[0];
      const winningKind = kinds[winner];

      // Every other reporter: success without effect for the same outcome (a retry of it),
      // 409 RUN_NOT_RUNNING for the other one. Nothing else.
      answers.forEach((answer, i) => {
        if (i === winner) return;
        expect([i, answer]).toEqual([i, kinds[i] === winningKind ? 'effect:none' : 'error:RUN_NOT_RUNNING']);
      });

      const run = await readRun(t, runId);
      expect(run).toEqual((settled[winner] as PromiseFulfilledResult<ReportResult>).value.run);
      expect(run.version).toBe(3);
      expect(run.status).toBe(winningKind);
      if (winningKind === 'completed') expect(run).toMatchObject({ output: { reporter: winner }, error: null });
      else expect(run).toMatchObject({ output: null, error: { message: `reporter ${winner}`, code: 'NON_RETRYABLE', retryable: false } });
      // Only the winner's step was saved.
      expect((await readSteps(t, runId)).map((s) => [s.stepId, s.output])).toEqual([[work, winner]]);
      expect(await readLeases(t, runId)).toEqual([]);

      await settle(t);
      expect(await outcomesAnnounced(t.engine)).toBe(announcedBefore + 1);
      expect(events.subjects).toEqual([`public.default.system.run.${runId}.${winningKind}`]);
      events.stop();
    }
  });

  it(`${REPORTERS} concurrent cancels and completions: exactly one terminal write, and every answer names it`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { runId, job } = await startRunning();
      const announcedBefore = await outcomesAnnounced(t.engine);
      const events = recordRunEvents(t);
      const kinds = Array.from({ length: REPORTERS }, (_v, i) => (i % 2 === 0 ? 'cancel' : 'complete'));

      const settled = await Promise.allSettled(
        kinds.map((kind, i) =>
          kind === 'cancel'
            ? t.engine.api.cancelRun(SCOPE, runId, `cancel ${i}`)
            : t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { reporter: i } })),
        ),
      );

      const run = await readRun(t, runId);
      expect(run.version).toBe(3);
      expect(['completed', 'cancelled']).toContain(run.status);
      const view = toRunView(run);

      const completions = settled.filter((_s, i) => kinds[i] === 'complete').map(answerOf);
      const cancels = settled.filter((_s, i) => kinds[i] === 'cancel');
      // Every cancel answers with the run as it stands after the one terminal write.
      for (const c of cancels) {
        expect(c.status).toBe('fulfilled');
        expect((c as PromiseFulfilledResult<RunView>).value).toEqual(view);
      }
      if (run.status === 'completed') {
        expect(completions.filter((a) => a === 'effect:outcome')).toHaveLength(1);
        expect(completions.filter((a) => a !== 'effect:outcome')).toEqual(Array(REPORTERS / 2 - 1).fill('effect:none'));
        const winner = settled.findIndex((s) => answerOf(s) === 'effect:outcome');
        expect(run.output).toEqual({ reporter: winner });
      } else {
        expect(completions).toEqual(Array(REPORTERS / 2).fill('error:RUN_NOT_RUNNING'));
        expect(run.output).toBeNull();
        expect(run.error).toMatchObject({ code: 'CANCELLED', message: expect.stringMatching(/^cancel \d+$/) });
      }
      expect(await readLeases(t, runId)).toEqual([]);

      await settle(t);
      expect(await outcomesAnnounced(t.engine)).toBe(announcedBefore + 1);
      expect(events.subjects).toEqual([`public.default.system.run.${runId}.${run.status}`]);
      events.stop();
    }
  });
});
