import { randomBytes } from 'node:crypto';
import { Bus, subjects } from '@ironflow/bus';
import { JobAssignment } from '@ironflow/contracts';
import { Engine } from '@ironflow/engine';
import { STORES, CrashingFollowUpTracker, TestEngine, auditOf, openTestEngine, waitFor, waitForAdmission } from '@ironflow/testing';
import { CHILD_CANCEL_ON, registerInvokeFunctions, reportInvoke } from './admission-kit';
import { auditRows, endChild, readRun } from './post-commit-kit';

/**
 * Contract tests of the specification "A stuck store cannot take the pool" (issue 10 item 2):
 * which paths wait for an outcome's audit row, after its frame, and which return with the row
 * stuck. Audit inserts are blocked with the "block audit insert" hook behind the sink port, with
 * a budget long enough that only the test's `unblock` ends a blocked write.
 */
const CONFIG = { auditBudgetMs: 60_000, followUpDrainMs: 1000, admissionGraceMs: 0 };
const ONCE = { maxAttempts: 1, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 };
/** The status row of `runId` (other rows pass). */
const statusRowOf = (runId: string) => (row: { eventType: string; runId: string | null }) => row.eventType === 'run.status_changed' && row.runId === runId;

describe.each(STORES)('blocked audit on sweeps and continuations [%s]', (dialect) => {
  let t: TestEngine;
  let crashing: CrashingFollowUpTracker;
  beforeEach(async () => {
    crashing = new CrashingFollowUpTracker();
    t = await openTestEngine(dialect, CONFIG, { bus: 'in-process', followUps: crashing, security: { secretsKey: randomBytes(32) } });
  });
  afterEach(async () => {
    t.audit.unblock();
    await t.close();
  });

  const fenceOf = (job: JobAssignment) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });
  const frames = (runId: string, bus: Bus = t.bus) => {
    const seen: unknown[] = [];
    const sub = bus.subscribe(subjects.result(t.scope.project, t.scope.env, runId), (m) => seen.push(m.data));
    return { seen, stop: () => sub.unsubscribe() };
  };
  /** Runs `call`, and shows it waits for the stuck status row after the frame, and returns once the row landed. */
  const heldOnlyAfterTheFrame = async <T>(runId: string, call: () => Promise<T>, engine: Engine = t.engine, bus: Bus = t.bus): Promise<T> => {
    const sink = auditOf(engine);
    const f = frames(runId, bus);
    sink.block(statusRowOf(runId));
    let returned = false;
    const calling = call().finally(() => (returned = true));
    await waitFor('the frame', () => f.seen.length === 1 || undefined);
    await waitFor('the status row stuck', () => sink.waiting === 1 || undefined);
    expect(returned).toBe(false);
    expect(await auditRows(t, runId, 'run.status_changed')).toBe(0);
    sink.unblock();
    const value = await calling;
    expect(await auditRows(t, runId, 'run.status_changed')).toBe(1);
    f.stop();
    return value;
  };
  /** Shows `call` returns with the outcome committed, its frame out and its status row still stuck; the row lands once the table recovers. */
  const returnsWithTheRowStuck = async (runId: string, call: () => Promise<unknown>) => {
    const f = frames(runId);
    t.audit.block(statusRowOf(runId));
    await call();
    await waitFor('the frame', () => f.seen.length === 1 || undefined);
    await waitFor('the status row stuck', () => t.audit.waiting === 1 || undefined);
    expect(await readRun(t, runId)).toMatchObject({ status: 'failed' });
    expect(await auditRows(t, runId, 'run.status_changed')).toBe(0);
    t.audit.unblock();
    await waitFor('the row landed', async () => (await auditRows(t, runId, 'run.status_changed')) === 1 || undefined);
    f.stop();
  };

  it('TestPostCommit_BlockedAuditHoldsSweepsOnlyAfterTheFrame: a failed dispatch (a declared secret missing at the claim) sends its frame, then waits for its row', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'needs-secret', mode: 'pull', secrets: ['MISSING_SECRET'], retry: ONCE });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['needs-secret'] });
    const runId = (await t.engine.triggers.invoke(t.scope, 'needs-secret', {})).id;
    expect(await heldOnlyAfterTheFrame(runId, () => t.engine.pull.poll('w1', 1))).toEqual([]);
    expect(await readRun(t, runId)).toMatchObject({ status: 'failed', error: { code: 'SECRET_NOT_FOUND' } });
  });

  it('TestPostCommit_BlockedAuditHoldsSweepsOnlyAfterTheFrame: the scheduler\'s timeout sweep sends the frame of the run it fails, then waits for its row', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'approver', mode: 'pull', retry: ONCE });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['approver'] });
    const runId = (await t.engine.triggers.invoke(t.scope, 'approver', {})).id;
    const [job] = await t.engine.pull.poll('w1', 1);
    await t.engine.pull.update('w1', job.job_id, { status: 'yielded', yield: { type: 'wait_for_event', step_id: `${runId}:approval:0`, event_filter: { event: 'approved', timeout: '1s' } }, ...fenceOf(job) });
    t.db.clock.advance(2000);
    expect(await heldOnlyAfterTheFrame(runId, () => t.engine.scheduler.timeoutSweep())).toBe(1);
    expect(await readRun(t, runId)).toMatchObject({ status: 'failed', error: { code: 'EVENT_WAIT_TIMED_OUT' } });
  });

  it('TestPostCommit_BlockedAuditHoldsSweepsOnlyAfterTheFrame: the orphan sweep sends the frame of a run whose admission it refuses, then waits for its row', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'guarded', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called', triggers: [{ event: 'order.placed' }], cancelOn: CHILD_CANCEL_ON });
    crashing.crash();
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'o-1' } });
    expect(crashing.dropped).toContain('run-admission');
    // A fresh node, on which the function has lost its endpoint: its sweep refuses the held run.
    const fresh = await t.restart();
    await fresh.api.registerFunction(t.scope, { id: 'guarded', mode: 'pull', triggers: [{ event: 'order.placed' }], cancelOn: CHILD_CANCEL_ON });
    const outcomes = await heldOnlyAfterTheFrame(runIds[0], () => fresh.orphans.run(), fresh, fresh.resources.bus);
    expect(outcomes.get(runIds[0])).toBe('refused');
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'failed', error: { code: 'ADMISSION_REFUSED' } });
  });

  it('TestPostCommit_BlockedAuditDoesNotDelayTerminalContinuation: a wake whose continuation is refused fails the parent, sends its frame and returns with its row stuck; the row lands once the table recovers', async () => {
    await registerInvokeFunctions(t);
    const { parentId, childId } = await reportInvoke(t, 'o-2');
    await waitForAdmission(t, childId);
    // The parent's continuation can no longer be admitted: its function lost its endpoint.
    await t.engine.api.registerFunction(t.scope, { id: 'parent', mode: 'pull', triggers: [{ event: 'go' }] });
    await returnsWithTheRowStuck(parentId, async () => {
      await endChild(t.engine, t.scope, childId, 'completed');
      // The wake and the child's announce have ended: what is left is the parent's announce, at its row.
      await waitFor('the wake returned', () => t.engine.resources.followUps.size === 1 || undefined);
    });
    expect(await readRun(t, parentId)).toMatchObject({ error: { code: 'ADMISSION_REFUSED' } });
  });

  it('TestPostCommit_BlockedAuditDoesNotHoldBrokerResumeFailure: a run the event broker resumes and whose dispatch fails returns with its row stuck; the row lands once the table recovers', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'approver', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called', retry: ONCE });
    const runId = (await t.engine.triggers.invoke(t.scope, 'approver', {})).id;
    const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 1, project: t.scope.project, env: t.scope.env }, 'node-a');
    await t.engine.reports.apply(runId, { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! }, { kind: 'yielded', yield: { type: 'wait_for_event', step_id: `${runId}:approval:0`, event_filter: { event: 'approved', timeout: '1h' } } });
    // The push function loses its endpoint while the run waits: its resumed dispatch fails.
    await t.engine.api.registerFunction(t.scope, { id: 'approver', mode: 'pull' });
    await returnsWithTheRowStuck(runId, async () => {
      await t.engine.api.trigger(t.scope, { event: 'approved', data: {} });
      t.engine.start({ pushDispatch: true, scheduler: false });
      await waitFor('the resumed run failed', async () => (await readRun(t, runId))?.status === 'failed' || undefined);
      // The dispatcher's call returned: its stop drains nothing left in flight, with the row still stuck.
      await t.engine.push.stop(60_000);
    });
    expect(await readRun(t, runId)).toMatchObject({ error: { message: expect.stringContaining('no endpoint URL') } });
  });
});

