import { randomUUID } from 'node:crypto';
import { RunRecord, leasesSql, runsSql } from '@ironflow/store';
import { STORES, TestStore, openTestStore } from '@ironflow/testing';
import { Outcome, OutcomeGuard, commitOutcome } from './outcome';

/**
 * The terminal commit (DESIGN.md "The outcome transaction") against a real store: which guard
 * lets a write through, what the write leaves behind, and that a terminal row never moves.
 */
describe.each(STORES)('commitOutcome [%s]', (dialect) => {
  let db: TestStore;

  beforeEach(async () => {
    db = await openTestStore(dialect);
  });
  afterEach(() => db.dispose());

  async function queuedRun(parent?: { runId: string; stepId: string }, functionId = 'fn'): Promise<RunRecord> {
    return db.store.unitOfWork('test.insert', (tx) =>
      runsSql.insertRun(tx, {
        id: randomUUID(), project: 'default', env: 'default', functionId, functionVersion: 1, mode: 'pull',
        eventId: null, maxAttempts: 3, input: { a: 1 }, ...(parent ? { parentRunId: parent.runId, parentStepId: parent.stepId } : {}),
      }),
    );
  }

  /** Claims the run as dispatch does: running, execution 1, a lease row. */
  async function runningRun(parent?: { runId: string; stepId: string }): Promise<RunRecord> {
    const queued = await queuedRun(parent);
    return db.store.unitOfWork('test.claim', async (tx) => {
      // The run row alone: on PostgreSQL a claim also returns the segment's rows (`segmentRows`).
      const [{ segmentRows: _segment, ...run }] = await runsSql.claimRuns(tx, { mode: 'pull', limit: 1, functionIds: ['fn'] }, () => randomUUID());
      expect(run.id).toBe(queued.id);
      await leasesSql.insertLease(tx, run.id, run.executionSeq, 'w1', 'fn:', tx.now + 30_000);
      return run;
    });
  }

  const read = (id: string) => db.store.read('test.read', async (tx) => (await runsSql.getRun(tx, id))!);
  const leases = (id: string) => db.store.read('test.leases', (tx) => leasesSql.countLeases(tx, id));
  const commit = (id: string, outcome: Outcome, guard: OutcomeGuard) =>
    db.store.unitOfWork('test.commit', async (tx) => ({ row: await commitOutcome(tx, id, outcome, guard), now: tx.now }));
  const fenceOf = (run: RunRecord): OutcomeGuard => ({ kind: 'execution', fence: { executionSeq: run.executionSeq, leaseToken: run.leaseToken! } });

  it('the live execution commits: terminal status, output, version + 1, ended_at, lease deleted; the committed row is returned', async () => {
    const run = await runningRun();
    const { row, now } = await commit(run.id, { status: 'completed', output: { ok: true } }, fenceOf(run));
    expect(row).toMatchObject({ id: run.id, status: 'completed', output: { ok: true }, version: run.version + 1, endedAt: now, updatedAt: now, wakePending: false });
    expect(await read(run.id)).toEqual(row);
    expect(await leases(run.id)).toBe(0);
  });

  it('a completion without output stores null', async () => {
    const run = await runningRun();
    const { row } = await commit(run.id, { status: 'completed', output: undefined }, fenceOf(run));
    expect(row).toMatchObject({ status: 'completed', output: null });
  });

  it('a failure stores the error and no output', async () => {
    const run = await runningRun();
    const error = { message: 'boom', code: 'X', retryable: false };
    const { row } = await commit(run.id, { status: 'failed', error }, fenceOf(run));
    expect(row).toMatchObject({ status: 'failed', output: null, error });
  });

  it('a child’s outcome sets wake_pending in the same write', async () => {
    const parent = await queuedRun(undefined, 'parent-fn');
    const child = await runningRun({ runId: parent.id, stepId: `${parent.id}:child:0` });
    const { row } = await commit(child.id, { status: 'completed', output: 1 }, fenceOf(child));
    expect(row).toMatchObject({ status: 'completed', wakePending: true, parentRunId: parent.id });
  });

  it.each([
    ['a wrong lease token', (run: RunRecord): OutcomeGuard => ({ kind: 'execution', fence: { executionSeq: run.executionSeq, leaseToken: 'other' } })],
    ['an earlier execution', (run: RunRecord): OutcomeGuard => ({ kind: 'execution', fence: { executionSeq: run.executionSeq - 1, leaseToken: run.leaseToken! } })],
    ['a version that moved on', (run: RunRecord): OutcomeGuard => ({ kind: 'version', status: 'running', version: run.version - 1 })],
    ['a status that is not the run’s', (run: RunRecord): OutcomeGuard => ({ kind: 'version', status: 'waiting', version: run.version })],
  ])('a guard with %s writes nothing and keeps the lease', async (_name, guardOf) => {
    const run = await runningRun();
    const { row } = await commit(run.id, { status: 'completed', output: 1 }, guardOf(run));
    expect(row).toBeNull();
    expect(await read(run.id)).toEqual(run);
    expect(await leases(run.id)).toBe(1);
  });

  it('the execution guard requires a running run: a matching fence on a queued (retried) run writes nothing', async () => {
    const run = await runningRun();
    await db.store.unitOfWork('test.requeue', (tx) => runsSql.requeueForRetry(tx, run, tx.now + 1000, { message: 'retry' }));
    const requeued = await read(run.id);
    expect(requeued.status).toBe('waiting_for_capacity');
    const { row } = await commit(run.id, { status: 'completed', output: 1 }, fenceOf(run));
    expect(row).toBeNull();
    expect(await read(run.id)).toEqual(requeued);
  });

  it('the version guard commits from the named state and version', async () => {
    const run = await runningRun();
    const { row } = await commit(run.id, { status: 'failed', error: { message: 'x' } }, { kind: 'version', status: 'running', version: run.version });
    expect(row).toMatchObject({ status: 'failed', version: run.version + 1 });
  });

  it('the not-terminal guard commits from any non-terminal state', async () => {
    const queued = await queuedRun();
    const { row } = await commit(queued.id, { status: 'cancelled', error: { message: 'stop', code: 'CANCELLED' } }, { kind: 'not-terminal' });
    expect(row).toMatchObject({ status: 'cancelled', version: 2, error: { message: 'stop', code: 'CANCELLED' } });
  });

  describe.each(['completed', 'failed', 'cancelled'] as const)('a %s run', (terminal) => {
    it('is never written again, whatever the guard', async () => {
      const run = await runningRun();
      const first: Outcome = terminal === 'completed' ? { status: 'completed', output: 'first' } : { status: terminal, error: { message: 'first' } };
      const { row: committed } = await commit(run.id, first, terminal === 'cancelled' ? { kind: 'not-terminal' } : fenceOf(run));
      expect(committed?.status).toBe(terminal);

      const later: Outcome[] = [{ status: 'completed', output: 'later' }, { status: 'failed', error: { message: 'later' } }, { status: 'cancelled', error: { message: 'later' } }];
      const guards: OutcomeGuard[] = [fenceOf(run), { kind: 'not-terminal' }, { kind: 'version', status: terminal, version: committed!.version }];
      for (const outcome of later) {
        for (const guard of guards) {
          expect((await commit(run.id, outcome, guard)).row).toBeNull();
        }
      }
      expect(await read(run.id)).toEqual(committed);
    });
  });
});
