import { DEFAULT_ENGINE_CONFIG, Engine } from '@ironflow/engine';
import { runsSql } from '@ironflow/store';
import { Client } from 'pg';
import { Locker, STORES, TestEngine, openLocker, testDatabaseUrl, waitFor, waitForAdmission } from '@ironflow/testing';
import { dispatchedUnclaimed, drainFollowUps, invocation, openAdmissionTest, reportInvoke } from './admission-kit';
import { readRun, readStep } from './post-commit-kit';

/**
 * Freeze and thaw of the instance authority (specification, "A freeze, thaw, reconcile or attest
 * holds the instance authority row"; issue 10 item 3): a frozen instance admits no new work and
 * its passes wait it out; a transition gives up on a lock after 500 ms on PostgreSQL.
 */

/** Registers a pull function `sleeper` and drives one run of it to a sleep due at once. Returns the run and its step. */
async function dueSleep(t: TestEngine, engine: Engine = t.engine): Promise<{ runId: string; stepId: string }> {
  await engine.api.registerFunction(t.scope, { id: 'sleeper', mode: 'pull', triggers: [{ event: 'nap' }] });
  await engine.pull.register(t.scope, 'w2', { worker_id: 'w2', function_ids: ['sleeper'] });
  const { runIds } = await engine.api.trigger(t.scope, { event: 'nap', data: {} });
  const [job] = await engine.pull.poll('w2', 1);
  expect(job.run_id).toBe(runIds[0]);
  const stepId = `${runIds[0]}:nap:0`;
  await engine.pull.update('w2', job.job_id, {
    status: 'yielded',
    yield: { type: 'sleep', step_id: stepId, until: new Date(t.db.clock.now()).toISOString() },
    execution_seq: job.execution_seq,
    lease_token: job.lease_token,
  });
  t.db.clock.advance(1);
  return { runId: runIds[0], stepId };
}

async function instanceRows(t: TestEngine): Promise<{ eventType: string; cause: string | null; data: string | null }[]> {
  const rows = await t.db.store.read('test', (tx) => tx.query<{ event_type: string; cause: string | null; data: string | null }>(
    `SELECT event_type, cause, data FROM audit_events WHERE event_type LIKE 'instance.%' ORDER BY id`,
  ));
  return rows.map((r) => ({ eventType: r.event_type, cause: r.cause, data: r.data }));
}

describe.each(STORES)('instance freeze and thaw [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => { t = await openAdmissionTest(dialect); });
  afterEach(() => t.close());

  it('records each transition once, with who and why, and reports the work it holds', async () => {
    expect(await t.engine.instance.status()).toMatchObject({ state: 'thawed', version: 0, since: null, by: null });
    const frozen = await t.engine.instance.freeze('admin', 'backup');
    expect(frozen).toMatchObject({ changed: true, status: { state: 'frozen', version: 1, by: 'admin', reason: 'backup' } });
    expect(Date.parse(frozen.status.since!)).toBeGreaterThan(0);
    expect(await t.engine.instance.freeze('admin')).toMatchObject({ changed: false, status: { state: 'frozen', version: 1 } });

    await t.engine.api.trigger(t.scope, { event: 'go', data: { orderId: 'A' } });
    expect(await t.engine.dispatch.claim({ mode: 'push', limit: 5, project: t.scope.project, env: t.scope.env }, 'node-a')).toEqual([]);
    expect((await t.engine.instance.status()).held).toMatchObject({ queued: 1, total: 1 });

    expect(await t.engine.instance.thaw('anonymous')).toMatchObject({ changed: true, status: { state: 'thawed', version: 2, by: 'anonymous', reason: null } });
    expect(await instanceRows(t)).toEqual([
      { eventType: 'instance.frozen', cause: 'backup', data: JSON.stringify({ by: 'admin', version: 1 }) },
      { eventType: 'instance.thawed', cause: null, data: JSON.stringify({ by: 'anonymous', version: 2 }) },
    ]);
    const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 5, project: t.scope.project, env: t.scope.env }, 'node-a');
    expect(segment.run.functionId).toBe('parent');
  });

  it('holds an invoke a report accepted during a freeze and admits it after the thaw; a due sleep wakes only after the thaw', async () => {
    const { runId, stepId: sleepStep } = await dueSleep(t);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A', { beforeReport: () => t.engine.instance.freeze('admin') });
    await drainFollowUps(t.engine);
    expect(await readRun(t, childId)).toMatchObject({ held: true, status: 'waiting_for_capacity' });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
    expect(await t.engine.scheduler.sleepSweep()).toBe(0);
    expect(await readStep(t, runId, sleepStep)).toMatchObject({ status: 'waiting' });
    expect(await t.engine.pendingInvokes.run()).toBe(1);
    await drainFollowUps(t.engine);
    expect(await readRun(t, childId)).toMatchObject({ held: true });
    expect((await t.engine.instance.status()).held).toMatchObject({ admissions: 1, sleeps: 1 });

    await t.engine.instance.thaw('admin');
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity' });
    await t.engine.pendingInvokes.run();
    await waitForAdmission(t, childId);
    await drainFollowUps(t.engine);
    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
    expect((await invocation(t, parentId, stepId))?.settledAt).not.toBeNull();
  });

  it('a sleep-loop tick during a freeze wakes no sleep; the first one after the thaw does', async () => {
    const { runId, stepId } = await dueSleep(t);
    await t.engine.instance.freeze('admin');
    await t.engine.scheduler.sleepTick();
    expect(await readStep(t, runId, stepId)).toMatchObject({ status: 'waiting' });
    await t.engine.instance.thaw('admin');
    await t.engine.scheduler.sleepTick();
    expect(await readStep(t, runId, stepId)).toMatchObject({ status: 'completed' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('TestInstanceFrozenStaleClaimRecovery: a recovery during a freeze changes nothing, and the claims come back after the thaw', async () => {
    // The stale claims here are execution leases (the capacity scanner's recovery); see README "Freezing an instance".
    const { childId } = await reportInvoke(t, 'A');
    await waitForAdmission(t, childId);
    const [job] = await t.engine.pull.poll('w1', 1);
    expect(job.run_id).toBe(childId);
    t.db.clock.advance(30_001);
    await t.engine.instance.freeze('admin');
    expect(await t.engine.recovery.scan()).toEqual([]);
    expect(await readRun(t, childId)).toMatchObject({ status: 'running', recoveries: 0, executionSeq: job.execution_seq, leaseToken: job.lease_token });
    expect(await t.db.store.read('t', (tx) => tx.query(`SELECT run_id FROM leases WHERE run_id = $1`, [childId]))).toHaveLength(1);

    await t.engine.instance.thaw('admin');
    expect(await t.engine.recovery.scan()).toEqual(['requeued']);
    expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', recoveries: 1, leaseToken: null });
    const [again] = await t.engine.pull.poll('w1', 1);
    expect(again).toMatchObject({ run_id: childId, execution_seq: job.execution_seq! + 1 });
  });
});

/** PostgreSQL only: each needs a real lock held by a second connection. */
describe('instance authority under real locks [postgres]', () => {
  let t: TestEngine;
  let locker: Locker;
  beforeEach(async () => {
    t = await openAdmissionTest('postgres');
    locker = await openLocker(t.db);
  });
  afterEach(async () => {
    await locker.close();
    await t.close();
  });

  const lockAuthority = () => locker.lockRows(`SELECT id FROM instance_authority WHERE id = 1 FOR UPDATE`);

  /** Freezes, accepts an invoke (held: the freeze stops its admission), thaws: the child is left to the pass. */
  async function childLeftToThePass() {
    const reported = await reportInvoke(t, 'A', { beforeReport: () => t.engine.instance.freeze('admin') });
    await drainFollowUps(t.engine);
    await t.engine.instance.thaw('admin');
    expect(await readRun(t, reported.childId)).toMatchObject({ held: true });
    return reported;
  }

  /** A connection of its own on the test's schema, for a freeze held open by the test. */
  async function sessionOnSchema(): Promise<{ client: Client; pid: number }> {
    const schema = String((await t.db.store.read('schema', (tx) => tx.query<{ s: string }>(`SELECT current_schema() AS s`)))[0].s);
    const client = new Client({ connectionString: testDatabaseUrl(), options: `-c search_path="${schema}"` });
    await client.connect();
    const pid = Number((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    return { client, pid };
  }

  it('a claim waits for a freeze in progress and then claims nothing; after the thaw it claims the run (issue 11: the authority read joined to the claim\'s read)', async () => {
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'go', data: { orderId: 'A' } });
    const freezer = await sessionOnSchema();
    try {
      await freezer.client.query('BEGIN');
      await freezer.client.query(`UPDATE instance_authority SET state = 'frozen', version = version + 1 WHERE id = 1`);
      const claim = t.engine.dispatch.claim({ mode: 'push', limit: 5, project: t.scope.project, env: t.scope.env }, 'node-a');
      await waitFor('the claim to wait for the freeze', async () => {
        const rows = await freezer.client.query<{ n: string }>(`SELECT COUNT(*) AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, [freezer.pid]);
        return Number(rows.rows[0].n) > 0;
      });
      await freezer.client.query('COMMIT');
      expect(await claim).toEqual([]);
    } finally {
      await freezer.client.end();
    }
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'waiting_for_capacity' });
    await t.engine.instance.thaw('admin');
    const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 5, project: t.scope.project, env: t.scope.env }, 'node-a');
    expect(segment.run.id).toBe(runIds[0]);
  });

  it('a claim that finds no run locks nothing, not even the authority row: its unit of work takes no transaction id', async () => {
    const xid = await t.db.store.unitOfWork('test.emptyClaim', async (tx) => {
      expect(await runsSql.claimRuns(tx, { mode: 'push', limit: 5 }, () => 'token')).toEqual([]);
      return (await tx.query<{ x: unknown }>('SELECT pg_current_xact_id_if_assigned() AS x'))[0].x;
    });
    expect(xid).toBeNull();
  });

  it('TestPendingInvocationChildLockLimitCoversAuthority: with the authority row locked, admitting a thawed invoke returns at its limit and changes nothing; the child is admitted once the lock clears', async () => {
    const { parentId, childId, stepId } = await childLeftToThePass();
    const child = (await readRun(t, childId))!;
    const invoke = (await invocation(t, parentId, stepId))!;
    await lockAuthority();
    // Returns while the row is still locked: the limit, not the lock's end, ended the wait.
    expect(await t.engine.admissions.admit({ run: child, invoke }, 'pass')).toBe('failed');
    expect(await readRun(t, childId)).toMatchObject({ held: true, status: 'waiting_for_capacity', version: child.version });
    expect((await invocation(t, parentId, stepId))?.settledAt).toBeNull();
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
    await locker.release();
    expect(await t.engine.admissions.admit({ run: child, invoke }, 'pass')).toBe('dispatched');
    expect(await dispatchedUnclaimed(t, childId)).toBe(true);
  });

  it('TestPendingInvoke_PassGivesUpOnALockedAuthority: with the authority row locked the pass and its admissions return and change nothing; the next pass admits the child', async () => {
    const { parentId, childId, stepId } = await childLeftToThePass();
    await lockAuthority();
    expect(await t.engine.pendingInvokes.run()).toBe(1);
    expect(await drainFollowUps(t.engine)).toBe(true);
    expect(await readRun(t, childId)).toMatchObject({ held: true });
    expect((await invocation(t, parentId, stepId))?.settledAt).toBeNull();
    await locker.release();
    await waitFor('the pass admits the child', async () => {
      await t.engine.pendingInvokes.run();
      await drainFollowUps(t.engine);
      return dispatchedUnclaimed(t, childId);
    });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting' });
  });

  it('TestSleepWake_GivesUpOnALockedAuthority: a wakeup gives up on a locked authority row and changes nothing; the sleep wakes after the row clears and the stale-claim recovery', async () => {
    const { runId, stepId } = await dueSleep(t);
    await lockAuthority();
    expect(await t.engine.scheduler.sleepSweep()).toBe(0);
    expect(await readStep(t, runId, stepId)).toMatchObject({ status: 'waiting' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting' });
    await locker.release();
    // The sweep's claim stays until the stale-claim recovery frees it (specification: "keeps its
    // claim until the stale-claim recovery releases it ... and a later sweep wakes it").
    expect(await t.engine.scheduler.sleepSweep()).toBe(0);
    t.db.clock.advance(DEFAULT_ENGINE_CONFIG.staleClaimMs + 1);
    expect(await t.engine.scheduler.staleClaimRecovery()).toBe(1);
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('TestInstanceControlStuckAuditWriteReleasesTheAuthorityRow: with audit_events locked a freeze gives up, changes nothing and frees the row; it lands once the table is free', async () => {
    await locker.lockTable('audit_events');
    await expect(t.engine.instance.freeze('admin', 'backup')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    // The row is free: a lock that does not wait gets it.
    await t.db.store.unitOfWork('t', (tx) => tx.query(`SELECT id FROM instance_authority WHERE id = 1 FOR UPDATE NOWAIT`));
    expect(await t.engine.instance.status()).toMatchObject({ state: 'thawed', version: 0 });
    await locker.release();
    expect(await instanceRows(t)).toEqual([]);
    expect(await t.engine.instance.freeze('admin', 'backup')).toMatchObject({ changed: true, status: { state: 'frozen', version: 1 } });
    expect(await instanceRows(t)).toHaveLength(1);
  });

  it('TestSleepWake_StuckFreezeAuditWriteDoesNotHoldTheSweep: a freeze stuck on audit_events gives up before a wakeup waiting on the authority row would; the sleep wakes and a deferred retry is claimed with the table still locked', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'flaky', mode: 'pull', triggers: [{ event: 'flake' }], retry: { maxAttempts: 2, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 1000 } });
    await t.engine.pull.register(t.scope, 'w3', { worker_id: 'w3', function_ids: ['flaky'] });
    const { runIds: [flakyId] } = await t.engine.api.trigger(t.scope, { event: 'flake', data: {} });
    const [first] = await t.engine.pull.poll('w3', 1);
    await t.engine.pull.update('w3', first.job_id, { status: 'failed', error: { message: 'try again', retryable: true }, execution_seq: first.execution_seq, lease_token: first.lease_token });
    expect(await readRun(t, flakyId)).toMatchObject({ status: 'waiting_for_capacity', attempt: 2 });
    const { runId, stepId } = await dueSleep(t);
    t.db.clock.advance(1001);

    await locker.lockTable('audit_events');
    const freeze = t.engine.instance.freeze('admin').then(() => 'landed', (err: { code?: string }) => err.code);
    // The freeze holds the authority row while its audit insert waits on the table.
    await waitFor('the freeze waiting on audit_events', async () => {
      const rows = await t.db.store.read('t', (tx) => tx.query(`SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO audit_events%'`));
      return rows.length > 0 || undefined;
    });
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);
    expect(await freeze).toBe('UNAVAILABLE');
    expect(await readStep(t, runId, stepId)).toMatchObject({ status: 'completed' });
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity' });
    const [retry] = await t.engine.dispatch.claim({ mode: 'pull', limit: 5, project: t.scope.project, env: t.scope.env, functionIds: ['flaky'] }, 'w3');
    expect(retry.run).toMatchObject({ id: flakyId, attempt: 2 });
    expect(await t.engine.instance.status()).toMatchObject({ state: 'thawed', version: 0 });

    await locker.release();
    expect(await t.engine.instance.freeze('admin')).toMatchObject({ changed: true, status: { state: 'frozen' } });
  });
});
