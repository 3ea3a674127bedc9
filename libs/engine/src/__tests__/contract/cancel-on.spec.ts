import { subjects } from '@ironflow/bus';
import { STORES, TestEngine, countStreamMessages, openTestEngine, waitFor, waitForAdmission } from '@ironflow/testing';
import { ADMISSION_TEST_CONFIG, drainFollowUps, emitCancel, holdAudit, registerInvokeFunctions, reportInvoke } from './admission-kit';
import { auditRows, metricValue, pollOne, readRun, readStep } from './post-commit-kit';

/**
 * `cancel_on` (specification, "What follows a commit", "Two recovery paths announce the same
 * way", and the tests of `post_commit_announce_test.go` / `post_commit_followup_test.go` it
 * names), on SQLite and PostgreSQL against real NATS JetStream.
 */
describe.each(STORES)('cancel_on [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, ADMISSION_TEST_CONFIG, { bus: 'nats' });
  });
  afterEach(() => t.close());

  const drain = () => drainFollowUps(t.engine);
  const specCount = async (runId: string) =>
    Number((await t.db.store.read('test', (tx) => tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM cancel_on_specs WHERE run_id = $1`, [runId])))[0].n);

  /** A triggered run of `order.process` (cancelOn order.cancelled by data.orderId), driven to a sleep. */
  async function sleepingOrder(orderId: string, extra: Record<string, unknown> = {}): Promise<string> {
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId, ...extra } });
    await waitForAdmission(t, runIds[0]);
    const job = await pollOne(t.engine, runIds[0]);
    await t.engine.pull.update('w1', job.job_id, {
      status: 'yielded',
      yield: { type: 'sleep', step_id: `${runIds[0]}:nap:0`, until: new Date(Date.now() + 3_600_000).toISOString() },
      execution_seq: job.execution_seq,
      lease_token: job.lease_token,
    });
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'waiting' });
    return runIds[0];
  }

  async function registerOrderProcess(condition?: string, match = 'data.orderId'): Promise<void> {
    const spec = { event: 'order.cancelled', match, ...(condition ? { if: condition } : {}) };
    await t.engine.api.registerFunction(t.scope, { id: 'order.process', mode: 'pull', triggers: [{ event: 'order.placed' }], cancelOn: [spec] });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['order.process'] });
  }

  it('order.cancelled {orderId: A} cancels the waiting run of order A only, with the event as its cause', async () => {
    await registerOrderProcess();
    const runA = await sleepingOrder('A');
    const runB = await sleepingOrder('B');
    const eventId = await emitCancel(t, 'A');
    await drain();

    expect(await readRun(t, runA)).toMatchObject({
      status: 'cancelled',
      error: { code: 'CANCELLED', message: `cancel_on: order.cancelled ${eventId}`, event_id: eventId, event_name: 'order.cancelled' },
    });
    expect(await readRun(t, runB)).toMatchObject({ status: 'waiting' });
    const history = (await t.engine.api.getRunSteps(t.scope, runA)).history;
    expect(history.find((h) => h.eventType === 'run.cancelled')).toMatchObject({ cause: 'cancel-on-event' });
    // The cancel deletes the run's specs; the live run keeps its own.
    expect(await specCount(runA)).toBe(0);
    expect(await specCount(runB)).toBe(1);
    // A second matching event finds nothing more to cancel.
    await emitCancel(t, 'A');
    await drain();
    expect(await metricValue(t.engine, 'ironflow_run_outcomes_total', { status: 'cancelled' })).toBe(1);
  });

  it('a bare match path (`orderId`) reads the data as `data.orderId` does, live and on replay; a value missing on either side matches nothing', async () => {
    await registerOrderProcess(undefined, 'orderId');
    const runA = await sleepingOrder('A');
    const runB = await sleepingOrder('B');
    const { runIds: [noOrder] } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { customer: 'Ada' } });
    await waitForAdmission(t, noOrder);
    await emitCancel(t, 'A');
    await drain();
    expect(await readRun(t, runA)).toMatchObject({ status: 'cancelled' });
    expect(await readRun(t, runB)).toMatchObject({ status: 'waiting' });
    expect(await readRun(t, noOrder)).toMatchObject({ status: 'waiting_for_capacity' });
    // A cancel event without the field cancels neither a run with it nor one without it.
    await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { reason: 'none given' } });
    await drain();
    expect(await readRun(t, runB)).toMatchObject({ status: 'waiting' });
    expect(await readRun(t, noOrder)).toMatchObject({ status: 'waiting_for_capacity' });
    // The replay of a new run applies the same rules: C's earlier cancel cancels it; the field-less event cancels no field-less run.
    await emitCancel(t, 'C');
    const { runIds: [runC] } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'C' } });
    const { runIds: [noOrder2] } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: {} });
    await drain();
    expect(await readRun(t, runC)).toMatchObject({ status: 'cancelled' });
    expect(await readRun(t, noOrder2)).toMatchObject({ status: 'waiting_for_capacity', held: false });
  });

  it('a cancel event that came before the run existed is replayed when a trigger creates it: the run is cancelled before any dispatch', async () => {
    await registerOrderProcess();
    const eventId = await emitCancel(t, 'C');
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'C' } });
    await drain();
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'cancelled', executionSeq: 0, startedAt: null, error: { message: `cancel_on: order.cancelled ${eventId}` } });
    expect(await t.engine.pull.poll('w1', 5)).toEqual([]);
    // Another order is not touched by that cancel.
    const other = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'D' } });
    await drain();
    expect(await readRun(t, other.runIds[0])).toMatchObject({ status: 'waiting_for_capacity', held: false });
  });

  it('the cancel_on cleanup deletes the specs a run kept when it ended another way, and leaves a live run\'s', async () => {
    await registerOrderProcess();
    const done = await sleepingOrder('A');
    const live = await sleepingOrder('B');
    await t.engine.api.cancelRun(t.scope, done, 'by hand');
    expect(await specCount(done)).toBe(1);
    t.engine.resources.config.passPageSize = 1; // one run a page: the cursor goes on to the next
    let deleted = 0;
    for (let pass = 0; pass < 3; pass += 1) deleted += await t.engine.cancelOn.cleanUp();
    expect(deleted).toBe(1);
    expect(await specCount(done)).toBe(0);
    expect(await specCount(live)).toBe(1);
  });

  it('an `if` condition over the run\'s event and the cancel event decides, live and on replay; one that errors does not cancel and is counted', async () => {
    await registerOrderProcess('async.data.reason != "test" && event.data.total < 100');
    const small = await sleepingOrder('A', { total: 20 });
    const large = await sleepingOrder('B', { total: 500 });
    await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'A', reason: 'test' } });
    await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'B', reason: 'customer' } });
    await drain();
    expect(await readRun(t, small)).toMatchObject({ status: 'waiting' });
    expect(await readRun(t, large)).toMatchObject({ status: 'waiting' });
    const eventId = (await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'A', reason: 'customer' } })).eventId;
    await drain();
    expect(await readRun(t, small)).toMatchObject({ status: 'cancelled', error: { message: `cancel_on: order.cancelled ${eventId}` } });
    // A cancel without `reason` makes the condition fail: no cancel, one error counted.
    const another = await sleepingOrder('D', { total: 10 });
    await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'D' } });
    await drain();
    expect(await readRun(t, another)).toMatchObject({ status: 'waiting' });
    expect(await metricValue(t.engine, 'ironflow_cancel_on_expression_errors_total', { function_id: 'order.process' })).toBe(1);
    // The replay applies the condition too: of two earlier cancels of order C, only the one it accepts cancels the new run.
    await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'C', reason: 'test' } });
    const accepted = (await t.engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId: 'C', reason: 'fraud' } })).eventId;
    const { runIds } = await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'C', total: 5 } });
    await drain();
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'cancelled', executionSeq: 0, error: { message: `cancel_on: order.cancelled ${accepted}` } });
    const replayedLarge = (await t.engine.api.trigger(t.scope, { event: 'order.placed', data: { orderId: 'C', total: 700 } })).runIds[0];
    await drain();
    expect(await readRun(t, replayedLarge)).toMatchObject({ status: 'waiting_for_capacity', held: false });
  });

  it('TestPostCommit_CancelIsAnnouncedOnEveryPath: a cancel_on match sends one frame, one cancelled event, one run.cancelled row (cancel-on-event) and wakes the parent once', async () => {
    await registerInvokeFunctions(t);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A');
    await waitForAdmission(t, childId);
    await emitCancel(t, 'A');
    await drain();
    await emitCancel(t, 'A');
    await drain();

    expect(await readRun(t, childId)).toMatchObject({ status: 'cancelled', error: { code: 'CANCELLED' } });
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))).toBe(1);
    expect(await countStreamMessages('PUBSUB', subjects.runEvent(t.scope.env, childId, 'cancelled'))).toBe(1);
    const rows = await t.db.store.read('test', (tx) => tx.query<{ cause: string }>(`SELECT cause FROM audit_events WHERE run_id = $1 AND event_type = 'run.cancelled'`, [childId]));
    expect(rows).toEqual([{ cause: 'cancel-on-event' }]);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(await metricValue(t.engine, 'ironflow_parent_wakes_total')).toBe(1);
  });

  it('TestPostCommit_CancelOnAnnouncesWithoutRereadingTheRun: with every read failing after the cancel_on commit, the frame, the event, the row and the wake still go out', async () => {
    await registerInvokeFunctions(t);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A');
    await waitForAdmission(t, childId);
    let committed = false;
    t.faults.afterCommit((name) => name === 'cancelOnCancel', () => {
      committed = true;
      t.faults.fail({ unit: (_name, kind) => kind === 'read' });
    });
    await emitCancel(t, 'A');
    await drain();
    expect(committed).toBe(true);

    expect(await readRun(t, childId)).toMatchObject({ status: 'cancelled' });
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))).toBe(1);
    expect(await countStreamMessages('PUBSUB', subjects.runEvent(t.scope.env, childId, 'cancelled'))).toBe(1);
    expect(await auditRows(t, childId, 'run.cancelled')).toBe(1);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('TestPostCommit_ShutdownDrainsCancelOnAnnounce: stop waits for a cancel_on announce under way, and returns once its row has landed', async () => {
    await registerInvokeFunctions(t);
    const { childId } = await reportInvoke(t, 'A');
    await waitForAdmission(t, childId);
    await drain();
    const audit = holdAudit(t.engine);
    await emitCancel(t, 'A');
    await waitFor('the RESULTS frame', async () => (await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))) === 1 || undefined);
    await audit.reached();
    const stopping = t.engine.stop(10_000);
    // The announce is still under way (its row is held) when shutdown begins.
    expect(t.engine.resources.followUps.size).toBeGreaterThan(0);
    audit.release();
    await stopping;
    expect(await auditRows(t, childId, 'run.cancelled')).toBe(1);
    expect(await metricValue(t.engine, 'ironflow_audit_write_failures_total')).toBe(0);
  });

  it('TestPostCommit_CancelOnAfterStopBeganIsStillAnnounced: a cancel_on commit made after shutdown began is announced, and wakes the parent', async () => {
    await registerInvokeFunctions(t);
    const { parentId, childId, stepId } = await reportInvoke(t, 'A');
    await waitForAdmission(t, childId);
    await drain();
    const gate = t.gate.arm('cancelOn.afterRead', childId);
    await emitCancel(t, 'A');
    await gate.reached;
    const stopping = t.engine.stop(10_000);
    gate.release();
    await stopping;

    expect(await readRun(t, childId)).toMatchObject({ status: 'cancelled' });
    expect(await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))).toBe(1);
    expect(await countStreamMessages('PUBSUB', subjects.runEvent(t.scope.env, childId, 'cancelled'))).toBe(1);
    expect(await auditRows(t, childId, 'run.cancelled')).toBe(1);
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
  });
});

describe('cancelOn at registration [sqlite]', () => {
  let t: TestEngine;
  beforeEach(async () => { t = await openTestEngine('sqlite'); });
  afterEach(() => t.close());

  it('is stored and answered back', async () => {
    const specs = [{ event: 'order.cancelled', match: 'data.orderId', if: 'async.data.full == true' }, { event: 'shop.closed' }];
    const { function: fn } = await t.engine.api.registerFunction(t.scope, { id: 'f', mode: 'pull', cancelOn: specs });
    expect(fn.cancelOn).toEqual(specs);
  });

  it('refuses an `if` condition that does not compile, and any key it does not act on, by name, with VALIDATION_ERROR', async () => {
    const bad = t.engine.api.registerFunction(t.scope, { id: 'f', mode: 'pull', cancelOn: [{ event: 'a' }, { event: 'b', if: 'run.data.x > 1' }, { event: 'c', if: 'async.data.x +' }] });
    const err = (await bad.catch((e: unknown) => e)) as Error;
    expect(err).toMatchObject({ code: 'VALIDATION_ERROR' });
    expect(err.message).toContain('cancelOn.1.if');
    expect(err.message).toContain('cancelOn.2.if');
    const withTimeout = t.engine.api.registerFunction(t.scope, { id: 'f', mode: 'pull', cancelOn: [{ event: 'a', timeout: '1h' } as never] });
    await expect(withTimeout).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining('timeout') });
    expect(await t.engine.api.listFunctions(t.scope)).toEqual([]);
  });
});
