import { EngineError } from '@ironflow/contracts';
import { ReportResult, SegmentReport } from '@ironflow/engine';
import { ExecutionFence } from '@ironflow/fencing';
import { SCOPE, STORES, TestEngine, openLocker, openTestEngine, waitFor } from '@ironflow/testing';
import { outcomesAnnounced, readLeases, readRun, readSteps, recordRunEvents, settle, stepId } from './engine-kit.test';

/**
 * Group commit of push outcomes (`OutcomeGroupCommit`, issue 11): reports that end their run and
 * arrive while a commit is in flight share the next one, and each run keeps the outcome contract
 * (specification, "Run outcomes after commit"): its write is fenced by its own execution, a
 * stale, repeated or unwritable report among them is judged alone as before, and every run's
 * outcome is written and announced exactly once. On SQLite and PostgreSQL.
 *
 * Reports are handed to `ReportSystem.apply` as the push dispatcher hands them
 * (`groupCommit: true`), in one synchronous block: the first starts a commit at once, alone, and
 * the others wait for it and go together in the next (no timing involved).
 */
describe.each(STORES)('outcome group commit [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: 'http://127.0.0.1:9/api/ironflow', triggers: [{ event: 'push.started' }] });
  });
  afterEach(() => t.close());

  /** `n` push runs claimed as the dispatcher claims them: running, with a lease and a fence. */
  async function claimed(n: number): Promise<{ runId: string; fence: ExecutionFence; nextSequence: number }[]> {
    for (let i = 0; i < n; i++) await t.engine.api.trigger(SCOPE, { event: 'push.started', data: { i } });
    const segments = await t.engine.dispatch.claim({ mode: 'push', limit: n, project: SCOPE.project, env: SCOPE.env }, 'node-a');
    expect(segments).toHaveLength(n);
    // As on a dispatcher: the function's recording profile is cached (its runs' rows looked it up),
    // so a report whose steps it records not goes to its commit without a read.
    await waitFor('the recording profile cached', () => t.engine.resources.audit.skips(SCOPE.project, SCOPE.env, 'pushed', 'step.completed') || undefined);
    return segments.map((s) => ({ runId: s.run.id, fence: { executionSeq: s.run.executionSeq, leaseToken: s.run.leaseToken! }, nextSequence: s.nextSequence }));
  }

  const completion = (runId: string, nextSequence: number, output: unknown): SegmentReport => ({
    kind: 'completed',
    output,
    stepOffset: nextSequence,
    steps: [{ id: stepId(runId, 'work'), name: 'work', type: 'invoke', status: 'completed', output: `${runId}-done` } as never],
  });

  const ownerOf = (id: string) => ({ project: SCOPE.project, env: SCOPE.env, id, functionId: 'pushed' });

  /** Applies each report as the push dispatcher does, all in one synchronous block. */
  function applyTogether(reports: { runId: string; fence: ExecutionFence; report: SegmentReport }[]): Promise<PromiseSettledResult<ReportResult>[]> {
    return Promise.allSettled(reports.map((r) => t.engine.reports.apply(r.runId, r.fence, r.report, undefined, { groupCommit: true, owner: ownerOf(r.runId) })));
  }

  /** The group commits made (units of work named `commitOutcomes`), counted from here. */
  function countGroups(): { readonly count: number } {
    const spy = jest.spyOn(t.faults, 'unitOfWork');
    return { get count() { return spy.mock.calls.filter(([name]) => name === 'commitOutcomes').length; } };
  }

  const answer = (s: PromiseSettledResult<ReportResult>) => (s.status === 'fulfilled' ? s.value.effect : s.reason instanceof EngineError ? s.reason.code : String(s.reason));

  it('reports that arrive while a commit is in flight share the next: each run ends once, with its steps, its lease released, announced once', async () => {
    const runs = await claimed(5);
    const groups = countGroups();
    const events = recordRunEvents(t);
    const results = await applyTogether(runs.map((r) => ({ ...r, report: completion(r.runId, r.nextSequence, { n: r.runId }) })));
    expect(results.map(answer)).toEqual(['outcome', 'outcome', 'outcome', 'outcome', 'outcome']);
    // The first commit went alone; the four that waited for it shared one.
    expect(groups.count).toBe(2);
    await settle(t);
    for (const r of runs) {
      // insert = 1, claim = 2, the one terminal write = 3
      expect(await readRun(t, r.runId)).toMatchObject({ status: 'completed', output: { n: r.runId }, version: 3, wakePending: false });
      expect((await readSteps(t, r.runId)).map((s) => [s.stepId, s.status, s.output, s.sequence])).toEqual([[stepId(r.runId, 'work'), 'completed', `${r.runId}-done`, r.nextSequence]]);
      expect(await readLeases(t, r.runId)).toEqual([]);
    }
    expect(await outcomesAnnounced(t.engine, 'completed')).toBe(5);
    expect(events.subjects.filter((s) => s.endsWith('.completed')).sort()).toEqual(runs.map((r) => `public.${SCOPE.env}.system.run.${r.runId}.completed`).sort());
    events.stop();
  });

  it('a stale report and a repeated one in a group are judged alone (STALE_EXECUTION, no effect); the others commit', async () => {
    const [first, live, stale, repeated] = await claimed(4);
    // `repeated` ends first, alone: its report arrives again in the group.
    expect((await t.engine.reports.apply(repeated.runId, repeated.fence, completion(repeated.runId, repeated.nextSequence, 'once'), undefined, { groupCommit: true, owner: ownerOf(repeated.runId) })).effect).toBe('outcome');
    const groups = countGroups();
    const results = await applyTogether([
      { ...first, report: completion(first.runId, first.nextSequence, 'first') },
      { ...live, report: completion(live.runId, live.nextSequence, 'live') },
      { ...stale, fence: { ...stale.fence, leaseToken: 'superseded' }, report: completion(stale.runId, stale.nextSequence, 'stale') },
      { ...repeated, report: completion(repeated.runId, repeated.nextSequence, 'again') },
    ]);
    expect(results.map(answer)).toEqual(['outcome', 'outcome', 'STALE_EXECUTION', 'none']);
    expect(groups.count).toBe(2);
    await settle(t);
    expect(await readRun(t, live.runId)).toMatchObject({ status: 'completed', output: 'live', version: 3 });
    // The stale report wrote nothing: the run still runs its live execution, with its lease, no steps.
    expect(await readRun(t, stale.runId)).toMatchObject({ status: 'running', version: 2, leaseToken: stale.fence.leaseToken });
    expect(await readLeases(t, stale.runId)).toHaveLength(1);
    expect(await readSteps(t, stale.runId)).toEqual([]);
    // The repeat changed nothing and was not announced again.
    expect(await readRun(t, repeated.runId)).toMatchObject({ status: 'completed', output: 'once', version: 3 });
    expect(await outcomesAnnounced(t.engine, 'completed')).toBe(3);
  });

  it('a group whose commit fails rolls back every run, and each report is then applied alone: every run ends once', async () => {
    const runs = await claimed(4);
    const groups = countGroups();
    const applying = applyTogether(runs.map((r) => ({ ...r, report: completion(r.runId, r.nextSequence, r.runId) })));
    // The first commit has begun, alone: the next one, the group of the three that waited, fails.
    t.faults.fail({ unit: (name) => name === 'commitOutcomes' }, 1);
    expect((await applying).map(answer)).toEqual(['outcome', 'outcome', 'outcome', 'outcome']);
    expect(t.faults.failures).toEqual(['unit commitOutcomes']);
    expect(groups.count).toBe(2);
    await settle(t);
    for (const r of runs) {
      expect(await readRun(t, r.runId)).toMatchObject({ status: 'completed', output: r.runId, version: 3 });
      expect(await readSteps(t, r.runId)).toHaveLength(1);
      expect(await readLeases(t, r.runId)).toEqual([]);
    }
    expect(await outcomesAnnounced(t.engine, 'completed')).toBe(4);
  });

  // PostgreSQL alone: SQLite has no row locks.
  if (dialect === 'postgres') it('a run whose row another transaction holds does not hold its group: the others commit, and it is applied alone once the row is free', async () => {
    const [first, locked, free] = await claimed(3);
    const locker = await openLocker(t.db);
    try {
      await locker.lockRows(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [locked.runId]);
      const [a, b, c] = [first, locked, free].map((r) => t.engine.reports.apply(r.runId, r.fence, completion(r.runId, r.nextSequence, r.runId), undefined, { groupCommit: true, owner: ownerOf(r.runId) }));
      expect((await a).effect).toBe('outcome');
      // `free` shared its group with `locked`, and committed while `locked`'s row is still held.
      expect((await c).effect).toBe('outcome');
      expect(await readRun(t, free.runId)).toMatchObject({ status: 'completed', version: 3 });
      // `locked`, applied alone, waits on its row.
      await waitFor('the locked run\'s report waiting on its row', async () => (await locker.waiters()) === 1 || undefined);
      await locker.release();
      expect((await b).effect).toBe('outcome');
    } finally {
      await locker.close();
    }
    await settle(t);
    expect(await readRun(t, locked.runId)).toMatchObject({ status: 'completed', output: locked.runId, version: 3 });
    expect(await readSteps(t, locked.runId)).toHaveLength(1);
    expect(await outcomesAnnounced(t.engine, 'completed')).toBe(3);
  });
});
