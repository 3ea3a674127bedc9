import { subjects } from '@ironflow/bus';
import { STORES, TestEngine, countStreamMessages, openTestEngine, waitFor } from '@ironflow/testing';
import { ADMISSION_TEST_CONFIG, drainFollowUps, emitCancel, history, invocation, registerInvokeFunctions, reportInvoke } from './admission-kit';
import { auditRows, readRun, readStep } from './post-commit-kit';

/**
 * An outcome that ends a run still held, before its admission's `run.created` row has landed
 * (specification, "Audit": the child's `run.created` row sorts first, and an invoked child's row is
 * written before its `cancel_on` replay): the outcome's announce writes that row first, so the
 * trail reads `run.created` before the outcome by time and by insert order, and the admission's
 * own row changes nothing. The window is held open deterministically: every `run.created` insert
 * waits on the "block audit insert" hook, so the admission stops right after the child's commit.
 * On SQLite and PostgreSQL against real NATS JetStream.
 */
describe.each(STORES)('held run outcome order [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, ADMISSION_TEST_CONFIG, { bus: 'nats' });
    await registerInvokeFunctions(t);
  });
  afterEach(() => t.close());

  /** Reports a sync invoke of `child` for order A with its `run.created` inserts held; resolves once the admission waits on its row. */
  async function heldChildWithoutItsRow() {
    t.audit.block((row) => row.eventType === 'run.created' && row.cause === 'invoke');
    const reported = await reportInvoke(t, 'A');
    await waitFor('the admission waits on its run.created row', () => t.audit.waiting > 0 || undefined);
    expect(await readRun(t, reported.childId)).toMatchObject({ status: 'waiting_for_capacity', held: true });
    expect(await auditRows(t, reported.childId, 'run.created')).toBe(0);
    return reported;
  }

  /**
   * Waits until the child is cancelled and its announce has reached the audit sink: its
   * `run.cancelled` row landed, or a row of that announce waits on the hold beside the admission's.
   * Then the frame is out and the parent's step has failed, with the rows still held.
   */
  async function cancelAnnounced(parentId: string, childId: string, stepId: string): Promise<void> {
    await waitFor('the held child cancelled', async () => (await readRun(t, childId))?.status === 'cancelled' || undefined);
    await waitFor('the cancel reached the audit sink', async () => (await auditRows(t, childId, 'run.cancelled')) === 1 || t.audit.waiting >= 2 || undefined);
    await waitFor('the RESULTS frame', async () => (await countStreamMessages('RESULTS', subjects.result(t.scope.project, t.scope.env, childId))) === 1 || undefined);
    await waitFor('the parent woken', async () => (await readStep(t, parentId, stepId))?.status === 'failed' || undefined);
  }

  /** After the hold is released: one `run.created` row, stamped with the child's creation time, before `run.cancelled` by time and by insert. */
  async function expectCreatedFirst(childId: string, cause: string): Promise<void> {
    const child = (await readRun(t, childId))!;
    const rows = await history(t, childId);
    expect(rows.map((r) => r.eventType)).toEqual(['run.created', 'run.cancelled']);
    expect(rows[0].id).toBeLessThan(rows[1].id);
    expect(rows[0].ts).toBe(child.createdAt);
    expect(rows[1].cause).toBe(cause);
  }

  it('a live cancel_on match that cancels a held child before its admission wrote run.created writes that row first; the admission ends and settles its invocation', async () => {
    const { parentId, childId, stepId } = await heldChildWithoutItsRow();
    const eventId = await emitCancel(t, 'A');
    await cancelAnnounced(parentId, childId, stepId);
    t.audit.unblock();
    expect(await drainFollowUps(t.engine)).toBe(true);

    expect(await readRun(t, childId)).toMatchObject({ status: 'cancelled', executionSeq: 0, startedAt: null, error: { message: `cancel_on: order.cancelled ${eventId}` } });
    await expectCreatedFirst(childId, 'cancel-on-event');
    expect((await invocation(t, parentId, stepId))?.settledAt).not.toBeNull();
    expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
  });

  it('a parent\'s cancel that cancels its held child before the child\'s admission wrote run.created writes that row first', async () => {
    const { parentId, childId, stepId } = await heldChildWithoutItsRow();
    expect(await t.engine.api.cancelRun(t.scope, parentId, 'changed my mind')).toMatchObject({ status: 'cancelled' });
    await waitFor('the held child cancelled', async () => (await readRun(t, childId))?.status === 'cancelled' || undefined);
    await waitFor('the child\'s cancel reached the audit sink', async () => (await auditRows(t, childId, 'run.cancelled')) === 1 || t.audit.waiting >= 2 || undefined);
    t.audit.unblock();
    expect(await drainFollowUps(t.engine)).toBe(true);

    expect(await readRun(t, childId)).toMatchObject({ status: 'cancelled', executionSeq: 0, error: { message: `parent run ${parentId} was cancelled` } });
    await expectCreatedFirst(childId, 'user-cancel');
    expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'waiting' });
  });
});
