/**
 * The trigger's common case in one statement on PostgreSQL (issue 11, `triggerSql.insertTriggerAtOnce`):
 * it writes the event, the run and, with a claim, the run's claim and lease exactly as the general
 * trigger's separate statements do; it writes nothing when its case does not hold (the functions
 * changed, a `waitForEvent` of the name is open, the event is a duplicate); a frozen instance
 * leaves the run queued.
 */
import { FunctionDefinition } from '@ironflow/contracts';
import { TestStore, openTestStore } from '@ironflow/testing';
import { TriggerAtOnce, authoritySql, correlationsSql, eventsSql, functionsSql, leasesSql, runsSql, triggerSql } from '@ironflow/store';

const definition = (id: string, timeoutMs = 5000): FunctionDefinition => ({
  id,
  name: id,
  mode: 'push',
  endpointUrl: 'http://127.0.0.1:9/api/ironflow',
  triggers: [{ event: 'e' }],
  retry: { maxAttempts: 3, initialDelayMs: 10, backoffFactor: 2, maxDelayMs: 100 },
  timeoutMs,
  cancelOn: [],
});

describe('the trigger in one statement [postgres]', () => {
  let db: TestStore;
  beforeEach(async () => {
    db = await openTestStore('postgres');
    await db.store.unitOfWork('setup', (tx) => functionsSql.upsertFunction(tx, 'p', 'e', definition('f')));
  });
  afterEach(() => db.dispose());

  const trigger = (n: string, over: Partial<TriggerAtOnce> = {}, claim = true): TriggerAtOnce => ({
    event: { id: `ev-${n}`, project: 'p', env: 'e', name: 'e', data: { n }, idempotencyKey: `key-${n}`, version: 2, metadata: { m: n } },
    expected: [{ id: 'f', version: 1 }],
    run: { id: `run-${n}`, functionId: 'f', functionVersion: 1, mode: 'push', maxAttempts: 3, concurrencyKey: null, concurrencyLimit: null },
    claim: claim ? { leaseToken: `token-${n}`, holder: 'node-1', lane: 'f:', expiresAt: 9_000_000_000_000, deadlineAt: 9_000_000_000_001 } : null,
    ...over,
  });

  it('writes the event, the run, its claim and its lease as the separate statements do', async () => {
    const written = await db.store.unitOfWork('trigger', (tx) => triggerSql.insertTriggerAtOnce(tx, trigger('1')));
    expect(written).not.toBeNull();
    const stored = await db.store.read('reads', async (tx) => ({
      event: await eventsSql.getEvent(tx, 'ev-1'),
      run: await runsSql.getRun(tx, 'run-1'),
      holder: await leasesSql.leaseHolder(tx, 'run-1', 1),
    }));
    expect(written!.event).toEqual(stored.event);
    expect(written!.run).toEqual(stored.run);
    expect(stored.event).toMatchObject({ data: { n: '1' }, idempotencyKey: 'key-1', version: 2, metadata: { m: '1' } });
    expect(stored.run).toMatchObject({ status: 'running', executionSeq: 1, version: 2, leaseToken: 'token-1', eventId: 'ev-1', input: { n: '1' }, held: false });
    expect(stored.run!.startedAt).toBe(stored.run!.createdAt);
    expect(stored.holder).toBe('node-1');
  });

  it('without a claim the run stays queued and has no lease', async () => {
    const written = await db.store.unitOfWork('trigger', (tx) => triggerSql.insertTriggerAtOnce(tx, trigger('2', {}, false)));
    expect(written!.run).toMatchObject({ status: 'waiting_for_capacity', executionSeq: 0, version: 1, leaseToken: null, startedAt: null });
    expect(await db.store.read('lease', (tx) => leasesSql.countLeases(tx, 'run-2'))).toBe(0);
  });

  it('a frozen instance leaves the run queued, unclaimed', async () => {
    await db.store.unitOfWork('freeze', (tx) => authoritySql.transitionAuthority(tx, 'frozen', 'test', null));
    const written = await db.store.unitOfWork('trigger', (tx) => triggerSql.insertTriggerAtOnce(tx, trigger('3')));
    expect(written!.run).toMatchObject({ status: 'waiting_for_capacity', executionSeq: 0, leaseToken: null });
    expect(await db.store.read('lease', (tx) => leasesSql.countLeases(tx, 'run-3'))).toBe(0);
  });

  it('writes nothing when the functions changed, a waitForEvent of the name is open, or the event is a duplicate', async () => {
    const nothing = async (t: TriggerAtOnce) => {
      expect(await db.store.unitOfWork('trigger', (tx) => triggerSql.insertTriggerAtOnce(tx, t))).toBeNull();
      expect(await db.store.read('run', (tx) => runsSql.getRun(tx, t.run!.id))).toBeNull();
    };
    // A newer version of the function (its definition changed).
    await db.store.unitOfWork('change', (tx) => functionsSql.upsertFunction(tx, 'p', 'e', definition('f', 6000)));
    await nothing(trigger('4'));
    expect(await db.store.read('event', (tx) => eventsSql.getEvent(tx, 'ev-4'))).toBeNull();
    // Another function whose trigger names the event.
    await db.store.unitOfWork('another', (tx) => functionsSql.upsertFunction(tx, 'p', 'e', definition('g')));
    await nothing(trigger('5', { expected: [{ id: 'f', version: 2 }] }));
    // An open waitForEvent of the name.
    await db.store.unitOfWork('wait', (tx) => correlationsSql.insertCorrelation(tx, { runId: 'waiter', stepId: 's', project: 'p', env: 'e', eventName: 'e', matchPath: null, matchValue: null }));
    const both = [{ id: 'f', version: 2 }, { id: 'g', version: 1 }];
    expect(await db.store.unitOfWork('trigger', (tx) => triggerSql.insertTriggerAtOnce(tx, trigger('6', { expected: both.slice(0, 1), run: null })))).toBeNull();
    await db.store.unitOfWork('close', (tx) => correlationsSql.closeCorrelation(tx, 'waiter', 's'));
    // A duplicate idempotency key, and a duplicate event id.
    await db.store.unitOfWork('deactivate g', (tx) => tx.execute(`UPDATE functions SET status = 'inactive' WHERE id = 'g'`));
    const first = await db.store.unitOfWork('trigger', (tx) => triggerSql.insertTriggerAtOnce(tx, trigger('7', { expected: [{ id: 'f', version: 2 }], run: { ...trigger('7').run!, functionVersion: 2 } })));
    expect(first).not.toBeNull();
    await nothing(trigger('8', { event: { ...trigger('8').event, idempotencyKey: 'key-7' }, expected: [{ id: 'f', version: 2 }] }));
    await nothing(trigger('9', { event: { ...trigger('9').event, id: 'ev-7' }, expected: [{ id: 'f', version: 2 }] }));
  });
});
