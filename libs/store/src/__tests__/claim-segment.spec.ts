/**
 * A claim reads its segment with its claiming update on PostgreSQL (issue 11): the rows it returns
 * are exactly what the separate reads return (function, event, steps in order; no event for an
 * invoked child; no function when it is gone). The claim's leases are written in one statement
 * there, and one each on SQLite, with the same result.
 */
import { FunctionDefinition } from '@ironflow/contracts';
import { STORES, TestStore, openTestStore } from '@ironflow/testing';
import { ClaimedRun, NewLease, Tx, authoritySql, eventsSql, functionsSql, leasesSql, runsSql, stepsSql } from '@ironflow/store';

const definition = (id: string): FunctionDefinition => ({
  id,
  name: id,
  mode: 'pull',
  triggers: [{ event: 'e' }],
  retry: { maxAttempts: 3, initialDelayMs: 10, backoffFactor: 2, maxDelayMs: 100 },
  timeoutMs: 5000,
  cancelOn: [],
  metadata: { owner: 'team' },
});

describe.each(STORES)('a claim and its segment [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => {
    db = await openTestStore(dialect);
  });
  afterEach(() => db.dispose());

  const newRun = (tx: Tx, id: string, functionId: string, eventId: string | null) =>
    runsSql.insertRun(tx, { id, project: 'p', env: 'e', functionId, functionVersion: 1, mode: 'pull', eventId, maxAttempts: 3, input: { n: id } });

  it('each claimed run carries the rows the separate reads return (PostgreSQL), or none to read (SQLite)', async () => {
    await db.store.unitOfWork('setup', async (tx) => {
      await functionsSql.upsertFunction(tx, 'p', 'e', definition('f'));
      await eventsSql.insertEvent(tx, { id: 'ev1', project: 'p', env: 'e', name: 'e', data: { a: [1, 'x'] }, metadata: { m: true }, version: 2 });
      await newRun(tx, 'r1', 'f', 'ev1');
      await stepsSql.saveReportedSteps(tx, 'r1', [
        { id: 's1', name: 'one', type: 'invoke', status: 'completed', output: { big: 2 ** 40, text: 'é' } },
        { id: 's2', name: 'two', type: 'invoke', status: 'completed', output: null },
        { id: 's3', name: 'three', type: 'invoke', status: 'completed' },
      ], 0);
      await newRun(tx, 'r2', 'f', null); // an invoked child: no stored event
      await newRun(tx, 'r3', 'gone', null); // its function is gone
    });
    const claimed: ClaimedRun[] = await db.store.unitOfWork('claim', (tx) => runsSql.claimRuns(tx, { mode: 'pull', limit: 10 }, () => `token-${Math.random()}`));
    expect(claimed.map((r) => [r.id, r.status, r.executionSeq])).toEqual([['r1', 'running', 1], ['r2', 'running', 1], ['r3', 'running', 1]]);
    if (dialect === 'sqlite') {
      expect(claimed.every((r) => r.segmentRows === undefined)).toBe(true);
      return;
    }
    const separate = await db.store.read('reads', async (tx) => {
      const out = [];
      for (const r of claimed) {
        out.push({
          fn: await functionsSql.getFunction(tx, r.project, r.env, r.functionId),
          event: r.eventId ? await eventsSql.getEvent(tx, r.eventId) : null,
          steps: await stepsSql.listSteps(tx, r.id),
        });
      }
      return out;
    });
    expect(claimed.map((r) => r.segmentRows)).toEqual(separate);
    expect(separate[0].steps.map((s) => [s.stepId, s.output])).toEqual([['s1', { big: 2 ** 40, text: 'é' }], ['s2', null], ['s3', undefined]]);
    expect(separate[0].event?.metadata).toEqual({ m: true });
    expect(separate[1].event).toBeNull();
    expect(separate[2].fn).toBeNull();
  });

  it('a claim’s leases are inserted together and replace an earlier lease of their run', async () => {
    const lease = (runId: string, executionSeq: number, deadlineAt: number | null): NewLease => ({ runId, executionSeq, holder: 'h', lane: `f:${runId}`, expiresAt: 1000 + executionSeq, deadlineAt });
    await db.store.unitOfWork('first', (tx) => leasesSql.insertLeases(tx, [lease('a', 1, null)]));
    await db.store.unitOfWork('batch', (tx) => leasesSql.insertLeases(tx, [lease('a', 2, 5000), lease('b', 1, null), lease('c', 1, 7000)]));
    await db.store.unitOfWork('none', (tx) => leasesSql.insertLeases(tx, []));
    const rows = await db.store.read('leases', (tx) => tx.query<Record<string, unknown>>(`SELECT run_id, execution_seq, holder, lane, expires_at, deadline_at FROM leases ORDER BY run_id`));
    expect(rows.map((r) => [r.run_id, Number(r.execution_seq), r.holder, r.lane, Number(r.expires_at), r.deadline_at === null ? null : Number(r.deadline_at)])).toEqual([
      ['a', 2, 'h', 'f:a', 1002, 5000],
      ['b', 1, 'h', 'f:b', 1001, null],
      ['c', 1, 'h', 'f:c', 1001, 7000],
    ]);
  });

  it('a run read with its function, under its row lock: the function as getFunction reads it, null when it is gone, no run when none', async () => {
    await db.store.unitOfWork('setup', async (tx) => {
      await functionsSql.upsertFunction(tx, 'p', 'e', definition('f'));
      await newRun(tx, 'r1', 'f', null);
      await newRun(tx, 'r2', 'gone', null);
    });
    const [withFn, gone, none, fn] = await db.store.unitOfWork('read', async (tx) => [
      await runsSql.getRunWithFunction(tx, 'r1', { lock: true }),
      await runsSql.getRunWithFunction(tx, 'r2', { lock: true }),
      await runsSql.getRunWithFunction(tx, 'missing'),
      await functionsSql.getFunction(tx, 'p', 'e', 'f'),
    ] as const);
    expect(withFn).toEqual({ run: await db.store.read('r1', (tx) => runsSql.getRun(tx, 'r1')), fn });
    expect(fn?.definition.metadata).toEqual({ owner: 'team' });
    expect([gone?.run.id, gone?.fn]).toEqual(['r2', null]);
    expect(none).toBeNull();
    // Another function of the run's project and env, named (a step.invoke report's target).
    const [named, unknown] = await db.store.unitOfWork('read', async (tx) => [
      await runsSql.getRunWithFunction(tx, 'r2', { lock: true, functionId: 'f' }),
      await runsSql.getRunWithFunction(tx, 'r1', { lock: true, functionId: 'nope' }),
    ] as const);
    expect([named?.run.id, named?.fn]).toEqual(['r2', fn]);
    expect([unknown?.run.id, unknown?.fn]).toEqual(['r1', null]);
  });

  it('a run read with its function when thawed: the same read as getRunWithFunction with the freeze beside it; frozen says so', async () => {
    await db.store.unitOfWork('setup', async (tx) => {
      await functionsSql.upsertFunction(tx, 'p', 'e', definition('f'));
      await newRun(tx, 'r1', 'f', null);
    });
    const read = () => db.store.unitOfWork('read', async (tx) => [await runsSql.getRunWithFunctionIfThawed(tx, 'r1'), await runsSql.getRunWithFunctionIfThawed(tx, 'missing')] as const);
    const expected = await db.store.unitOfWork('read', (tx) => runsSql.getRunWithFunction(tx, 'r1', { lock: true }));
    expect(await read()).toEqual([{ frozen: false, read: expected }, { frozen: false, read: null }]);
    await db.store.unitOfWork('freeze', (tx) => authoritySql.transitionAuthority(tx, 'frozen', 'test', 'test'));
    const [frozen, frozenMissing] = await read();
    expect([frozen.frozen, frozenMissing.frozen]).toEqual([true, true]);
  });

  it('hasClaimable says whether a claim would find a queued segment: not for held, later, other-mode or filtered-out runs, nor while frozen', async () => {
    const has = (filter: Parameters<typeof runsSql.hasClaimable>[1]) => db.store.read('look', (tx) => runsSql.hasClaimable(tx, filter));
    await db.store.unitOfWork('setup', async (tx) => {
      await runsSql.insertRun(tx, { id: 'held', project: 'p', env: 'e', functionId: 'f', functionVersion: 1, mode: 'push', eventId: null, maxAttempts: 1, input: null, held: true });
      await runsSql.insertRun(tx, { id: 'pull', project: 'p', env: 'e', functionId: 'f', functionVersion: 1, mode: 'pull', eventId: null, maxAttempts: 1, input: null });
    });
    expect(await has({ mode: 'push', limit: 5 })).toBe(false);
    expect(await has({ mode: 'pull', limit: 5 })).toBe(true);
    expect(await has({ mode: 'pull', limit: 5, functionIds: [] })).toBe(false);
    expect(await has({ mode: 'pull', limit: 5, functionIds: ['other'] })).toBe(false);
    expect(await has({ mode: 'pull', limit: 5, project: 'p', env: 'e', functionIds: ['f'] })).toBe(true);
    await db.store.unitOfWork('later', (tx) => tx.execute(`UPDATE runs SET available_at = $1 WHERE id = 'pull'`, [tx.now + 60_000]));
    expect(await has({ mode: 'pull', limit: 5 })).toBe(false);
    await db.store.unitOfWork('now', (tx) => tx.execute(`UPDATE runs SET available_at = 0 WHERE id = 'pull'`));
    await db.store.unitOfWork('freeze', (tx) => authoritySql.transitionAuthority(tx, 'frozen', 'test', 'test'));
    expect(await has({ mode: 'pull', limit: 5 })).toBe(false);
    await db.store.unitOfWork('thaw', (tx) => authoritySql.transitionAuthority(tx, 'thawed', 'test', 'test'));
    expect(await has({ mode: 'pull', limit: 5 })).toBe(true);
  });

  it('a claim at once with a lease inserts it for the claimed execution (one statement on PostgreSQL), and a run no longer held gets neither', async () => {
    const held = await db.store.unitOfWork('setup', async (tx) => {
      await functionsSql.upsertFunction(tx, 'p', 'e', definition('f'));
      await leasesSql.insertLease(tx, 'child', 0, 'old-holder', 'old-lane', 1, null);
      return runsSql.insertRun(tx, { id: 'child', project: 'p', env: 'e', functionId: 'f', functionVersion: 1, mode: 'push', eventId: null, maxAttempts: 3, input: { n: 1 }, held: true });
    });
    const lease = { holder: 'node-1', lane: 'f', expiresAt: 9000, deadlineAt: 12000 };
    const claimed = await db.store.unitOfWork('claim', (tx) => runsSql.claimRunAtOnce(tx, held, 'held', () => 'token-1', lease));
    expect([claimed?.status, claimed?.executionSeq, claimed?.leaseToken, claimed?.held]).toEqual(['running', 1, 'token-1', false]);
    if (dialect === 'postgres') expect(claimed?.segmentRows?.fn?.definition.id).toBe('f');
    const again = await db.store.unitOfWork('again', (tx) => runsSql.claimRunAtOnce(tx, held, 'held', () => 'token-2', { ...lease, holder: 'node-2' }));
    expect(again).toBeNull();
    const rows = await db.store.read('leases', (tx) => tx.query<Record<string, unknown>>(`SELECT run_id, execution_seq, holder, lane, expires_at, deadline_at FROM leases`));
    expect(rows.map((r) => [r.run_id, Number(r.execution_seq), r.holder, r.lane, Number(r.expires_at), Number(r.deadline_at)])).toEqual([['child', 1, 'node-1', 'f', 9000, 12000]]);
  });
});
