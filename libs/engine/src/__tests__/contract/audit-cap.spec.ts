import { JobAssignment } from '@ironflow/contracts';
import { subjects } from '@ironflow/bus';
import { slotsFor } from '@ironflow/follow-up';
import { STORES, TestEngine, isRunEventSubject, openTestEngine, waitFor } from '@ironflow/testing';
import { takeAllSlots } from './admission-kit';
import { auditRows, auditWriteFailures, engineForEachTest, metricValue, parentWaitingOnChild, parentsWithPolledChildren, pollOne, readRun, readStep, registerParentAndChild, testLocker, watchFrames } from './post-commit-kit';

/**
 * Contract tests of the specification "Shutdown" and "A stuck store cannot take the pool" (issue
 * 10 item 2): the scanner's lease rows, follow-ups during and after `Engine.stop`, and the cap on
 * what a burst of follow-ups holds. Audit inserts are blocked with the "block audit insert" hook
 * behind the sink port (`t.audit`), with a budget long enough that only the test's `unblock` or
 * the recorder's stop ends a blocked write.
 */
const BUDGET = 60_000;
const LEASE = 30_000;

describe.each(STORES)('audit follow-ups and shutdown [%s]', (dialect) => {
  const SLOTS = slotsFor(dialect, 8);
  let t: TestEngine;
  engineForEachTest(() => openTestEngine(dialect, { auditBudgetMs: BUDGET, followUpDrainMs: 1000, leaseMs: LEASE, scanMs: 20 }, { bus: 'in-process' }), (opened) => (t = opened));

  const failures = (eventType?: string) => auditWriteFailures(t, eventType);
  const frames = (runId: string) => watchFrames(t, runId);
  const fenceOf = (job: JobAssignment) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });
  const recoveries = () => metricValue(t.engine, 'ironflow_lease_recoveries_total');
  /** A leased pull run whose lease has expired on the store clock. */
  const expiredLease = async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'leased', mode: 'pull' });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['leased'] });
    const runId = (await t.engine.triggers.invoke(t.scope, 'leased', {})).id;
    await pollOne(t.engine, runId);
    await t.engine.resources.followUps.drain(5000);
    t.db.clock.advance(LEASE + 1);
    return runId;
  };

  it('TestPostCommit_BlockedAuditDoesNotBlockScannerStop: with the lease row stuck, the running scanner recovers the lease and Engine.stop stops it without waiting for the row', async () => {
    const runId = await expiredLease();
    t.audit.block();
    t.engine.start({ pushDispatch: false, scheduler: false, scanner: true });
    await waitFor('the lease recovered', async () => (await readRun(t, runId))?.status === 'waiting_for_capacity' || undefined);
    await waitFor('the lease row stuck', () => t.audit.waiting === 1 || undefined);
    const started = Date.now();
    await t.engine.stop(500);
    // Stopped well inside the row's budget: the scanner's stop does not wait for its row.
    expect(Date.now() - started).toBeLessThan(BUDGET / 2);
    expect(t.audit.waiting).toBe(0);
    expect(await recoveries()).toBe(1);
    expect(await auditRows(t, runId, 'run.lease_recovered')).toBe(0);
    expect(await failures('run.lease_recovered')).toBe(1);
  });

  it('TestPostCommit_LeaseAuditRowsOutliveTheSweepContext: a lease row still stuck when the sweep ends and the engine starts stopping lands once the table recovers', async () => {
    const runId = await expiredLease();
    t.audit.block();
    expect(await t.engine.recovery.scan()).toEqual(['requeued']);
    await waitFor('the lease row stuck', () => t.audit.waiting === 1 || undefined);
    // The sweep is over and the engine has begun stopping (its loops' signal is aborted at once); the row is still being written.
    let stopped = false;
    const stopping = t.engine.stop(10_000).then(() => (stopped = true));
    expect(t.audit.waiting).toBe(1);
    expect(stopped).toBe(false);
    t.audit.unblock();
    await stopping;
    expect(await auditRows(t, runId, 'run.lease_recovered')).toBe(1);
    expect(await failures()).toBe(0);
  });

  it('TestPostCommit_FollowUpConcurrencyIsCapped: a burst of outcomes with the audit table stuck holds no more writes than the slots, and every frame and wake goes out', async () => {
    const N = 3 * SLOTS;
    const { waits, jobs } = await parentsWithPolledChildren(t, N);
    const f = waits.map((w) => frames(w.childId));
    t.audit.block();
    await Promise.all(jobs.map((job) => t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { n: 1 }, ...fenceOf(job) })));
    await waitFor('every frame', () => f.every((x) => x.seen.length === 1) || undefined);
    await waitFor('every parent woken', async () => (await Promise.all(waits.map((w) => readStep(t, w.parentId, w.stepId)))).every((s) => s?.status === 'completed') || undefined);
    await waitFor('the rows stuck', () => t.audit.waiting > 0 || undefined);
    expect(t.audit.maxWaiting).toBeLessThanOrEqual(SLOTS);
    expect(t.engine.resources.wakeSlots.free).toBe(SLOTS);
    f.forEach((x) => x.stop());
    t.audit.unblock();
    await t.engine.resources.followUps.drain(10_000);
    for (const w of waits) expect(await auditRows(t, w.childId, 'run.status_changed')).toBe(1);
    expect(await failures()).toBe(0);
  });

  it('TestPostCommit_ShutdownDrainsFollowUpStartedAfterAdmissionCloses: a report that commits after Engine.stop began gets its frame and its row before stop returns', async () => {
    await registerParentAndChild(t, 'push');
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    const job = await pollOne(t.engine, childId);
    await t.engine.resources.followUps.drain(5000);
    const gate = t.gate.arm('report.afterRead', childId);
    const reporting = t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { charged: 42 }, ...fenceOf(job) });
    await gate.reached;
    t.audit.block();
    let stopped = false;
    const stopping = t.engine.stop(10_000).then(() => (stopped = true));
    const f = frames(childId);
    gate.release();
    await reporting;
    await waitFor('the frame', () => f.seen.length === 1 || undefined);
    await waitFor('the parent woken', async () => (await readStep(t, parentId, stepId))?.status === 'completed' || undefined);
    await waitFor('the status row stuck', () => t.audit.waiting === 1 || undefined);
    expect(stopped).toBe(false);
    f.stop();
    t.audit.unblock();
    await stopping;
    expect(await auditRows(t, childId, 'run.status_changed')).toBe(1);
    expect(await failures()).toBe(0);
  });

  it('TestPostCommit_OutcomeCommittedAfterStopIsAnnouncedWithoutAudit: an outcome committed after Engine.stop returned sends its frame and wakes its parent; its row is dropped and counted', async () => {
    await registerParentAndChild(t, 'push');
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    const job = await pollOne(t.engine, childId);
    await t.engine.stop(1000);
    const f = frames(childId);
    await t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { charged: 42 }, ...fenceOf(job) });
    await waitFor('the frame', () => f.seen.length === 1 || undefined);
    await waitFor('the parent woken', async () => (await readStep(t, parentId, stepId))?.status === 'completed' || undefined);
    f.stop();
    await waitFor('the row counted', async () => (await failures('run.status_changed')) === 1 || undefined);
    expect(await auditRows(t, childId, 'run.status_changed')).toBe(0);
    expect(await readRun(t, childId)).toMatchObject({ status: 'completed' });
  });

  it('TestPostCommit_FollowUpStoreWorkTakesASlot: a burst of parent wakes keeps to its slots, while every frame goes out at once', async () => {
    const N = 2 * SLOTS + 1;
    const { waits, jobs } = await parentsWithPolledChildren(t, N);
    // Every slot taken: the wakes of the burst queue for one.
    const releaseSlots = await takeAllSlots(t.engine);
    const f = waits.map((w) => frames(w.childId));
    await Promise.all(jobs.map((job) => t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { n: 1 }, ...fenceOf(job) })));
    await waitFor('every frame', () => f.every((x) => x.seen.length === 1) || undefined);
    f.forEach((x) => x.stop());
    // Each wake stops inside its unit of work (holding a connection) until the test lets it go.
    const gates = waits.map((w) => ({ reached: false, released: false, gate: t.gate.arm('wake.afterRead', w.parentId) }));
    gates.forEach((g) => void g.gate.reached.then(() => (g.reached = true)));
    releaseSlots();
    let released = 0;
    let most = 0;
    while (released < N) {
      const holding = await waitFor('a wake inside its unit of work', () => {
        const at = gates.filter((g) => g.reached && !g.released);
        return at.length > 0 ? at : undefined;
      });
      most = Math.max(most, holding.length);
      expect(holding.length).toBeLessThanOrEqual(SLOTS);
      for (const g of holding) {
        g.gate.release();
        g.released = true;
        released += 1;
      }
    }
    expect(most).toBeGreaterThan(0);
    await t.engine.resources.followUps.drain(10_000);
    for (const w of waits) expect(await readStep(t, w.parentId, w.stepId)).toMatchObject({ status: 'completed' });
    expect(t.engine.resources.wakeSlots.free).toBe(SLOTS);
  });

  it('a failed run event\'s dead letter takes a follow-up slot: with none free within its budget it is dropped and logged, and the run still ends; with one free it is written', async () => {
    const r = t.engine.resources;
    r.config.followUpBudgetMs = 300;
    const warned: unknown[] = [];
    r.logger = { ...r.logger, warn: (message, fields) => void warned.push({ message, subject: fields?.subject }) };
    await t.engine.api.registerFunction(t.scope, { id: 'quiet', mode: 'pull' });
    t.bus.failPublishes(isRunEventSubject);
    const deadLetters = async () => (await t.db.store.read('test', (tx) => tx.query<{ subject: string }>(`SELECT subject FROM dead_letters ORDER BY id`))).map((d) => d.subject);
    const cancelled = async () => {
      const runId = (await t.engine.triggers.invoke(t.scope, 'quiet', {})).id;
      await t.engine.api.cancelRun(t.scope, runId, 'stop');
      await r.followUps.drain(5000);
      expect(await readRun(t, runId)).toMatchObject({ status: 'cancelled' });
      return subjects.runEvent(t.scope.env, runId, 'cancelled');
    };

    const held: (() => void)[] = [];
    for (let release = await r.followUpSlots.tryAcquire(); release; release = await r.followUpSlots.tryAcquire()) held.push(release);
    expect(held).toHaveLength(SLOTS);
    const dropped = await cancelled();
    expect(await deadLetters()).toEqual([]);
    expect(warned).toEqual([{ message: 'run event lost and not recorded as a dead letter', subject: dropped }]);

    held.forEach((release) => release());
    const written = await cancelled();
    expect(await deadLetters()).toEqual([written]);
    expect(r.followUpSlots.free).toBe(SLOTS);
  });
});

describe('follow-ups under a real table lock [postgres]', () => {
  let t: TestEngine;
  const locks = testLocker(() => t.db);
  engineForEachTest(() => openTestEngine('postgres', { auditBudgetMs: BUDGET, followUpDrainMs: 1000, leaseMs: LEASE }, { bus: 'in-process' }), (opened) => (t = opened), locks);

  const fenceOf = (job: JobAssignment) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });

  it('TestPostCommit_LockedTableLeavesThePoolFreeOfFollowUps: with steps locked against writes, a burst of parent wakes holds no more connections than its slots, an unrelated read and the scanner still work, and the parents are woken once the table is free', async () => {
    const SLOTS = slotsFor('postgres', 8);
    const N = 3 * SLOTS;
    const { waits, jobs } = await parentsWithPolledChildren(t, N);
    // Reads of steps pass; the wakes' step writes wait on the lock (up to their 1 s lock limit).
    await locks.lockTable('steps', 'EXCLUSIVE');
    await Promise.all(jobs.map((job) => t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { n: 1 }, ...fenceOf(job) })));
    const lockWaiters = () => locks.waiters();
    let most = 0;
    await waitFor('wakes waiting on the lock', async () => { most = Math.max(most, await lockWaiters()); return most > 0 || undefined; });
    expect(await lockWaiters()).toBeLessThanOrEqual(SLOTS);
    expect((await t.engine.api.listFunctions(t.scope)).map((fn) => fn.id).sort()).toEqual(['child', 'parent']);
    expect(await t.engine.recovery.scan()).toEqual([]);
    // Every wake has given up at its lock limit, none holding more than the slots on the way.
    await t.engine.resources.followUps.drain(30_000);
    expect(most).toBeLessThanOrEqual(SLOTS);
    await locks.release();
    // The waiting-run pass wakes the parents once the table is free.
    await waitFor('every parent woken', async () => {
      await t.engine.wakes.waitingRunPass();
      await t.engine.resources.followUps.drain(10_000);
      return (await Promise.all(waits.map((w) => readStep(t, w.parentId, w.stepId)))).every((s) => s?.status === 'completed') || undefined;
    }, 30_000);
  });
});

describe('dead letters under a real table lock [postgres]', () => {
  let t: TestEngine;
  const locks = testLocker(() => t.db);
  engineForEachTest(() => openTestEngine('postgres', { followUpBudgetMs: 3000 }, { bus: 'in-process' }), (opened) => (t = opened), locks);

  it('with dead_letters locked, a burst of failed run events holds no more connections than the follow-up slots, each write ends at its budget, an unrelated read still works, and the runs end', async () => {
    const SLOTS = slotsFor('postgres', 8);
    const N = 3 * SLOTS;
    await t.engine.api.registerFunction(t.scope, { id: 'quiet', mode: 'pull' });
    const runIds: string[] = [];
    for (let i = 0; i < N; i += 1) runIds.push((await t.engine.triggers.invoke(t.scope, 'quiet', {})).id);
    t.bus.failPublishes(isRunEventSubject);
    await locks.lockTable('dead_letters');
    const cancels = runIds.map((runId) => t.engine.api.cancelRun(t.scope, runId, 'stop'));
    let most = 0;
    await waitFor('dead letters waiting on the lock', async () => { most = Math.max(most, await locks.waiters()); return most > 0 || undefined; });
    expect((await t.engine.api.listFunctions(t.scope)).map((fn) => fn.id)).toEqual(['quiet']);
    // Every write gives up at its budget with the table still locked.
    await waitFor('every dead letter given up', async () => {
      most = Math.max(most, await locks.waiters());
      return (await t.engine.resources.followUps.drain(50)) || undefined;
    }, 30_000);
    expect(most).toBeLessThanOrEqual(SLOTS);
    await Promise.all(cancels);
    for (const runId of runIds) expect(await readRun(t, runId)).toMatchObject({ status: 'cancelled' });
    await locks.release();
    expect(await t.db.store.read('test', (tx) => tx.query(`SELECT id FROM dead_letters`))).toEqual([]);
    expect(t.engine.resources.followUpSlots.free).toBe(SLOTS);
  });
});
