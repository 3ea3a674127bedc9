import { subjects } from '@ironflow/bus';
import { Engine } from '@ironflow/engine';
import { runsSql } from '@ironflow/store';
import { CrashingFollowUpTracker, STORES, TestEngine, countStreamMessages, isResultsSubject, isRunEventSubject, openTestEngine, waitFor } from '@ironflow/testing';
import { auditRows, endChild, metricValue, parentWaitingOnChild, pollOne, readRun, readStep, registerParentAndChild } from './post-commit-kit';

/**
 * Contract tests of the specification "Run outcomes after commit" that the follow-ups issue
 * names, on SQLite and PostgreSQL, against real NATS JetStream. Crash tests recover in a fresh
 * engine instance that shares only the store with the one stopped.
 */
describe.each(STORES)('post-commit follow-ups [%s]', (dialect) => {
  let t: TestEngine;
  let crashing: CrashingFollowUpTracker;

  beforeEach(async () => {
    crashing = new CrashingFollowUpTracker();
    t = await openTestEngine(dialect, { followUpDrainMs: 1000 }, { bus: 'nats', followUps: crashing });
  });
  afterEach(() => t.close());

  const drain = (engine: Engine = t.engine) => engine.resources.followUps.drain(10_000);

  describe.each(['completed', 'failed', 'cancelled'] as const)('TestPostCommit_CrashBeforeParentWakeRecovers', (how) => {
    it(`TestPostCommit_CrashBeforeParentWakeRecovers: a ${how} child wakes its parent from a fresh engine`, async () => {
      await registerParentAndChild(t, 'push');
      const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
      crashing.crash(); // the node dies right after the child's outcome commits
      // A crashed node never answers the caller: a cancel's call (which waits for its audit row) hangs.
      void endChild(t.engine, t.scope, childId, how);
      await waitFor(`the child ${how}`, async () => (await readRun(t, childId))?.status === how || undefined);
      expect(crashing.dropped).toContain('parent-wake');
      await t.engine.stop(1000);
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
      expect(await readRun(t, childId)).toMatchObject({ status: how, wakePending: true });

      const fresh = await t.restart({ bus: 'nats' });
      expect(await fresh.wakes.waitingRunPass()).toBe(1);
      await drain(fresh);

      const step = await readStep(t, parentId, stepId);
      if (how === 'completed') expect(step).toMatchObject({ status: 'completed', output: { charged: 42 } });
      else {
        expect(step?.status).toBe('failed');
        expect(JSON.parse(step!.error as string)).toMatchObject({ child_run_id: childId, function_id: 'child' });
      }
      const parent = await readRun(t, parentId);
      expect(parent).toMatchObject({ status: 'waiting_for_capacity' });
      expect(await readRun(t, childId)).toMatchObject({ wakePending: false });

      // A second pass (and a second wake) changes nothing.
      await fresh.wakes.waitingRunPass();
      await fresh.wakes.wakeParent((await readRun(t, childId))!);
      await drain(fresh);
      expect(await readRun(t, parentId)).toEqual(parent);
    });
  });

  it('TestPostCommit_RetriedCompletionReportIsIgnored: one RESULTS frame kept, nothing announced twice', async () => {
    await registerParentAndChild(t, 'pull');
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'go', data: {} });
    const job = await pollOne(t.engine, runIds[0]);
    const report = { status: 'completed' as const, output: { ok: 1 }, execution_seq: job.execution_seq, lease_token: job.lease_token };
    expect((await t.engine.pull.update('w1', job.job_id, report)).effect).toBe('outcome');
    await drain();
    const committed = await readRun(t, runIds[0]);
    expect((await t.engine.pull.update('w1', job.job_id, { ...report, output: { ok: 2 } })).effect).toBe('none');
    await drain();
    expect(await readRun(t, runIds[0])).toEqual(committed);
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, runIds[0]))).toBe(1);
    expect(t.bus.attempts.filter((a) => isResultsSubject(a.subject))).toHaveLength(1);
    expect(await auditRows(t, runIds[0], 'run.status_changed')).toBe(1);
  });

  it('TestPostCommit_CompletionDuringShutdownFinishes: a completion whose write starts before stop is committed and announced', async () => {
    await registerParentAndChild(t, 'push');
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    const frames: unknown[] = [];
    const sub = t.bus.subscribe(subjects.result(t.scope.project, t.scope.env, childId), (m) => frames.push(m.data));
    const job = await pollOne(t.engine, childId);
    const gate = t.gate.arm('report.afterRead', childId);
    const reporting = t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { charged: 42 }, execution_seq: job.execution_seq, lease_token: job.lease_token });
    await gate.reached;
    const stopping = t.engine.stop(10_000);
    gate.release();
    expect((await reporting).effect).toBe('outcome');
    await stopping;
    // When stop returns, the frame, the parent wake and the audit row are done.
    expect(await readRun(t, childId)).toMatchObject({ status: 'completed', wakePending: false });
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await auditRows(t, childId, 'run.status_changed')).toBe(1);
    await waitFor('the RESULTS frame', () => frames.length === 1 || undefined);
    expect(frames[0]).toMatchObject({ runId: childId, status: 'completed' });
    sub.unsubscribe();
  });

  it('TestPostCommit_FailedPublishStillWakesParent: no frame, no event, the parent still wakes', async () => {
    await registerParentAndChild(t, 'push');
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    t.bus.failPublishes((s) => isResultsSubject(s) || isRunEventSubject(s));
    await endChild(t.engine, t.scope, childId, 'completed');
    await drain();
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(await metricValue(t.engine, 'ironflow_run_result_publish_failures_total')).toBe(1);
    expect(await metricValue(t.engine, 'ironflow_run_event_publish_failures_total', { event: 'completed' })).toBe(1);
    const dead = await t.db.store.read('test', (tx) => tx.query<{ subject: string }>(`SELECT subject FROM dead_letters`));
    expect(dead.map((d) => d.subject)).toEqual([subjects.runEvent(t.scope.env, childId, 'completed')]);
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))).toBe(0);
  });

  it('TestPostCommit_CancelIsAnnouncedOnEveryPath: a user cancel sends one frame, one cancelled event, one audit row and wakes the parent once', async () => {
    await registerParentAndChild(t, 'push');
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    const events: unknown[] = [];
    const sub = t.bus.subscribe(subjects.runEvent(t.scope.env, childId, 'cancelled'), (m) => events.push(m.data));
    const answer = await t.engine.api.cancelRun(t.scope, childId, 'customer called');
    expect(answer).toMatchObject({ status: 'cancelled', error: { message: 'customer called' } });
    // The cancel's call waited for its audit row.
    expect(await auditRows(t, childId, 'run.cancelled')).toBe(1);
    const again = await t.engine.api.cancelRun(t.scope, childId, 'twice');
    expect(again).toMatchObject({ status: 'cancelled', error: { message: 'customer called' } });
    await drain();
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))).toBe(1);
    await waitFor('the cancelled event', () => events.length >= 1 || undefined);
    expect(await countStreamMessages('PUBSUB', subjects.runEvent(t.scope.env, childId, 'cancelled'))).toBe(1);
    expect(await auditRows(t, childId, 'run.cancelled')).toBe(1);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
    expect(await metricValue(t.engine, 'ironflow_parent_wakes_total')).toBe(1);
    expect(events).toHaveLength(1);
    sub.unsubscribe();
  });

  /** A lost wake: the child's outcome commits, the node dies before the wake. */
  async function lostWake(): Promise<{ parentId: string; childId: string; stepId: string; fresh: Engine }> {
    await registerParentAndChild(t, 'push');
    const waiting = await parentWaitingOnChild(t, 'push');
    crashing.crash();
    await endChild(t.engine, t.scope, waiting.childId, 'completed');
    await t.engine.stop(1000);
    return { ...waiting, fresh: await t.restart({ bus: 'nats' }) };
  }

  it('TestPostCommit_WaitingRunPassSkipsWakeWithoutASlot: no free slot, no wake; the next pass with a slot wakes', async () => {
    const { parentId, stepId, fresh } = await lostWake();
    const held: (() => void)[] = [];
    for (let release = await fresh.resources.wakeSlots.tryAcquire(); release; release = await fresh.resources.wakeSlots.tryAcquire()) held.push(release);
    expect(held.length).toBe(fresh.resources.wakeSlots.size);
    expect(await fresh.wakes.waitingRunPass()).toBe(0);
    await drain(fresh);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
    held.forEach((release) => release());
    expect(await fresh.wakes.waitingRunPass()).toBe(1);
    await drain(fresh);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed' });
  });

  it('TestPostCommit_WaitingRunPassWakeOutlivesItsContext: the pass is cancelled mid-wake and the wake still lands', async () => {
    const { parentId, stepId, fresh } = await lostWake();
    const gate = t.gate.arm('wake.afterRead', parentId);
    const context = new AbortController();
    expect(await fresh.wakes.waitingRunPass(context.signal)).toBe(1);
    await gate.reached;
    context.abort();
    const stopping = fresh.stop(10_000);
    gate.release();
    await stopping;
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });
});

describe.each(STORES)('run and step events [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => { t = await openTestEngine(dialect, { followUpDrainMs: 1000 }, { bus: 'nats' }); });
  afterEach(() => t.close());

  it('publishes a step event per reported step and a run event per outcome, best effort, the steps first', async () => {
    await registerParentAndChild(t, 'pull');
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'go', data: {} });
    const seen: string[] = [];
    const sub = t.bus.subscribe(`public.${t.scope.env}.system.run.${runIds[0]}.>`, (m) => seen.push(m.subject.slice(`public.${t.scope.env}.system.run.${runIds[0]}.`.length)));
    const job = await pollOne(t.engine, runIds[0]);
    const stepIds = [`${runIds[0]}:prepare:0`, `${runIds[0]}:ship:0`];
    await t.engine.pull.update('w1', job.job_id, {
      status: 'completed',
      output: { ok: true },
      steps: stepIds.map((id, i) => ({ id, name: id.split(':')[1], type: 'invoke' as const, status: 'completed' as const, output: i })),
      execution_seq: job.execution_seq,
      lease_token: job.lease_token,
    });
    await t.engine.resources.followUps.drain(5000);
    await waitFor('three events', () => seen.length >= 3 || undefined);
    // In the order they happened: a subscriber sees the run's steps end before the run does.
    expect(seen).toEqual([`step.${stepIds[0]}.completed`, `step.${stepIds[1]}.completed`, 'completed']);
    sub.unsubscribe();
  });
});
