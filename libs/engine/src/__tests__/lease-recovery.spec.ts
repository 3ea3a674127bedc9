import { subjects } from '@ironflow/bus';
import { STORES, TestEngine, countStreamMessages, openTestEngine, waitFor } from '@ironflow/testing';
import { auditRows, endChild, parentWaitingOnChild, pollOne, readRun, readStep, registerParentAndChild } from './contract/post-commit-kit';

const LEASE = 30_000;

describe.each(STORES)('lease expiry and recovery [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect, { leaseMs: LEASE, recoveryCeiling: 10, followUpDrainMs: 1000 }, { bus: 'nats' });
    await registerParentAndChild(t, 'push');
  });
  afterEach(() => t.close());

  it('requeues an expired execution with the same attempt; the lost execution is stale, the next one commits', async () => {
    const { childId } = await parentWaitingOnChild(t, 'push');
    const first = await pollOne(t.engine, childId);
    t.db.clock.advance(LEASE + 1);
    expect(await t.engine.recovery.scan()).toEqual(['requeued']);
    expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', attempt: 1, recoveries: 1, leaseToken: null });
    await t.engine.resources.followUps.drain(5000);
    expect(await auditRows(t, childId, 'run.lease_recovered')).toBe(1);

    const second = await pollOne(t.engine, childId);
    expect(second).toMatchObject({ execution_seq: first.execution_seq! + 1, attempt: 1 });
    const late = t.engine.pull.update('w1', first.job_id, { status: 'completed', output: { late: true }, execution_seq: first.execution_seq, lease_token: first.lease_token });
    await expect(late).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    await t.engine.pull.update('w1', second.job_id, { status: 'completed', output: { charged: 42 }, execution_seq: second.execution_seq, lease_token: second.lease_token });
    expect(await readRun(t, childId)).toMatchObject({ status: 'completed', output: { charged: 42 } });
  });

  it('does not recover a lease a heartbeat refreshed', async () => {
    const { childId } = await parentWaitingOnChild(t, 'push');
    const job = await pollOne(t.engine, childId);
    t.db.clock.advance(LEASE - 1000);
    await t.engine.pull.heartbeat('w1', { worker_id: 'w1', jobs: [{ job_id: job.job_id }] });
    t.db.clock.advance(2000);
    expect(await t.engine.recovery.scan()).toEqual([]);
    expect(await readRun(t, childId)).toMatchObject({ status: 'running', recoveries: 0 });
  });

  it('frees the lease of a run that already ended without running it again', async () => {
    const { childId } = await parentWaitingOnChild(t, 'push');
    await endChild(t.engine, t.scope, childId, 'completed');
    // A crash between an outcome and its release leaves a lease row behind.
    await t.db.store.unitOfWork('test', (tx) => tx.execute(`INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at) VALUES ($1, 1, 'dead-node', 'child:', $2)`, [childId, tx.now]));
    t.db.clock.advance(1);
    expect(await t.engine.recovery.scan()).toEqual(['released']);
    expect(await readRun(t, childId)).toMatchObject({ status: 'completed', executionSeq: 1 });
    expect(await t.engine.pull.poll('w1', 5)).toEqual([]);
  });

  it('TestPostCommit_RecoveryExhaustedRunIsAnnounced: the 11th consecutive recovery fails the run and announces it like any failure', async () => {
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    const events: unknown[] = [];
    const sub = t.bus.subscribe(subjects.runEvent(t.scope.env, childId, 'failed'), (m) => events.push(m.data));
    for (let i = 1; i <= 10; i += 1) {
      await pollOne(t.engine, childId);
      t.db.clock.advance(LEASE + 1);
      expect(await t.engine.recovery.scan()).toEqual(['requeued']);
      expect(await readRun(t, childId)).toMatchObject({ recoveries: i, status: 'waiting_for_capacity' });
    }
    await pollOne(t.engine, childId);
    t.db.clock.advance(LEASE + 1);
    expect(await t.engine.recovery.scan()).toEqual(['exhausted']);
    await t.engine.resources.followUps.drain(5000);

    const child = await readRun(t, childId);
    expect(child).toMatchObject({ status: 'failed', error: { code: 'EXECUTION_RECOVERY_EXHAUSTED', retryable: false }, wakePending: false });
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))).toBe(1);
    await waitFor('the failed event', () => events.length === 1 || undefined);
    expect(await auditRows(t, childId, 'run.status_changed')).toBe(1);
    const step = await readStep(t, parentId, stepId);
    expect(step?.status).toBe('failed');
    expect(JSON.parse(step!.error as string)).toMatchObject({ child_run_id: childId });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(await t.db.store.read('t', (tx) => tx.query(`SELECT * FROM leases WHERE run_id = $1`, [childId]))).toEqual([]);
    sub.unsubscribe();
  });

  it('TestPostCommit_RecoveryExhaustedAnnouncesCommittedFailure: a resume right after the recovery commit changes neither the frame, the failed event, the audit row nor the parent wake', async () => {
    const { parentId, childId, stepId } = await parentWaitingOnChild(t, 'push');
    const frames: { status?: string; error?: { code?: string } }[] = [];
    const events: { status?: string }[] = [];
    const subs = [
      t.bus.subscribe(subjects.result(t.scope.project, t.scope.env, childId), (m) => frames.push(m.data as never)),
      t.bus.subscribe(subjects.runEvent(t.scope.env, childId, '*'), (m) => events.push(m.data as never)),
    ];
    for (let i = 1; i <= 10; i += 1) {
      await pollOne(t.engine, childId);
      t.db.clock.advance(LEASE + 1);
      expect(await t.engine.recovery.scan()).toEqual(['requeued']);
    }
    await pollOne(t.engine, childId);
    t.db.clock.advance(LEASE + 1);
    const gate = t.gate.arm('recovery.afterCommit', childId);
    const scan = t.engine.recovery.scan();
    await gate.reached;
    // The engine has no resume of an ended run; the test writes what one would, right after the commit.
    await t.db.store.unitOfWork('test.resume', (tx) => tx.execute(
      `UPDATE runs SET status = 'waiting_for_capacity', error = NULL, ended_at = NULL, recoveries = 0, version = version + 1 WHERE id = $1`,
      [childId],
    ));
    gate.release();
    expect(await scan).toEqual(['exhausted']);
    await t.engine.resources.followUps.drain(5000);

    await waitFor('the frame and the failed event', () => (frames.length >= 1 && events.length >= 1) || undefined);
    expect(frames).toEqual([expect.objectContaining({ runId: childId, status: 'failed', error: expect.objectContaining({ code: 'EXECUTION_RECOVERY_EXHAUSTED' }) })]);
    expect(events).toEqual([expect.objectContaining({ runId: childId, status: 'failed' })]);
    const rows = await t.db.store.read('t', (tx) => tx.query<{ cause: string; data: string }>(`SELECT cause, data FROM audit_events WHERE run_id = $1 AND event_type = 'run.status_changed'`, [childId]));
    expect(rows).toHaveLength(1);
    expect(rows[0].cause).toBe('recovery-exhausted');
    expect(JSON.parse(rows[0].data)).toMatchObject({ status: 'failed', error: { code: 'EXECUTION_RECOVERY_EXHAUSTED' } });
    // The parent was woken with the committed failure, not the run as the resume left it.
    const step = await readStep(t, parentId, stepId);
    expect(step?.status).toBe('failed');
    expect(JSON.parse(step!.error as string)).toMatchObject({ child_run_id: childId, message: expect.stringContaining('lost its lease 11 times') });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    subs.forEach((s) => s.unsubscribe());
  });

  it('counts only consecutive recoveries: a segment that reports its end resets the count', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'sleeper', mode: 'pull', triggers: [{ event: 'nap' }] });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['child', 'parent', 'sleeper'] });
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'nap', data: {} });
    await pollOne(t.engine, runIds[0]);
    t.db.clock.advance(LEASE + 1);
    await t.engine.recovery.scan();
    const job = await pollOne(t.engine, runIds[0]);
    await t.engine.pull.update('w1', job.job_id, {
      status: 'yielded',
      yield: { type: 'sleep', step_id: `${runIds[0]}:nap:0`, until: new Date(t.db.clock.now()).toISOString() },
      execution_seq: job.execution_seq,
      lease_token: job.lease_token,
    });
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'waiting', recoveries: 0 });
  });
});

describe.each(STORES)('concurrency lanes [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect, { leaseMs: LEASE });
    await t.engine.api.registerFunction(t.scope, { id: 'one-at-a-time', mode: 'pull', triggers: [{ event: 'job' }], concurrency: { limit: 1, key: 'event.data.customer' } });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['one-at-a-time'] });
  });
  afterEach(() => t.close());

  it('runs one execution per key at a time; the next starts when the slot is released', async () => {
    const a1 = (await t.engine.api.trigger(t.scope, { event: 'job', data: { customer: 'a' } })).runIds[0];
    const a2 = (await t.engine.api.trigger(t.scope, { event: 'job', data: { customer: 'a' } })).runIds[0];
    const b1 = (await t.engine.api.trigger(t.scope, { event: 'job', data: { customer: 'b' } })).runIds[0];
    const first = await t.engine.pull.poll('w1', 10);
    // One run of lane "a" (runs created in the same millisecond go in id order) and the run of lane "b".
    expect(first).toHaveLength(2);
    const jobA = first.find((j) => j.run_id === a1 || j.run_id === a2)!;
    expect(first.map((j) => j.run_id)).toContain(b1);
    expect(await t.engine.pull.poll('w1', 10)).toEqual([]);
    await t.engine.pull.update('w1', jobA.job_id, { status: 'completed', output: 1, execution_seq: jobA.execution_seq, lease_token: jobA.lease_token });
    expect((await t.engine.pull.poll('w1', 10)).map((j) => j.run_id)).toEqual([jobA.run_id === a1 ? a2 : a1]);
  });

  it('a killed node frees its slot after lease expiry, and the queued run then starts', async () => {
    const r1 = (await t.engine.api.trigger(t.scope, { event: 'job', data: { customer: 'a' } })).runIds[0];
    const r2 = (await t.engine.api.trigger(t.scope, { event: 'job', data: { customer: 'a' } })).runIds[0];
    // Runs created in the same millisecond are claimed in id order: either may go first.
    const first = (await t.engine.pull.poll('w1', 10)).map((j) => j.run_id);
    expect(first).toHaveLength(1);
    const queued = first[0] === r1 ? r2 : r1;
    // the worker holding the first run dies: nothing reports, nothing heartbeats
    expect(await t.engine.pull.poll('w1', 10)).toEqual([]);
    t.db.clock.advance(LEASE + 1);
    expect(await t.engine.recovery.scan()).toEqual(['requeued']);
    const next = await t.engine.pull.poll('w1', 10);
    expect(next.map((j) => j.run_id)).toEqual([queued]);
  });
});
