import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { Engine } from '@ironflow/engine';
import { STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { ADMISSION_TEST_CONFIG, dispatchedUnclaimed, drainFollowUps, invocation, registerInvokeFunctions, reportInvoke, takeAllSlots } from './admission-kit';
import { endChild, parentWaitingOnChild, readRun, readStep, registerParentAndChild, testLocker } from './post-commit-kit';

/** A short lock limit keeps these tests quick; the specification's default is 1 s (`lockLimitMs`). */
const LOCK_LIMIT_MS = 400;
const STALE_CLAIM_MS = 120_000;

interface Sleeping {
  runId: string;
  stepId: string;
}

/** Registers push function `id` (never called: its segments are claimed and reported by hand), triggered by `go.<id>`. */
async function registerSleeper(t: TestEngine, id: string, concurrency?: number): Promise<void> {
  await t.engine.api.registerFunction(t.scope, {
    id,
    mode: 'push',
    endpointUrl: 'http://127.0.0.1:9/never-called',
    triggers: [{ event: `go.${id}` }],
    ...(concurrency ? { concurrency: { limit: concurrency } } : {}),
  });
}

/** Triggers `fn`, claims its segment and reports a sleep due `dueInMs` (default 1 s) from now. */
async function sleeping(t: TestEngine, fn: string, dueInMs = 1000): Promise<Sleeping> {
  const { runIds } = await t.engine.api.trigger(t.scope, { event: `go.${fn}`, data: {} });
  const runId = runIds[0];
  const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 1, project: t.scope.project, env: t.scope.env, functionIds: [fn] }, 'node-a');
  if (segment?.run.id !== runId) throw new Error(`expected to claim ${runId}, claimed ${segment?.run.id}`);
  const stepId = `${runId}:nap:0`;
  await t.engine.reports.apply(runId, { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! }, {
    kind: 'yielded',
    yield: { type: 'sleep', step_id: stepId, until: new Date(t.db.clock.now() + dueInMs).toISOString() },
  });
  return { runId, stepId };
}

/** The stored `claimed_at` of a sleep (ms, store clock), or `null`. */
async function claimedAt(t: TestEngine, s: Sleeping): Promise<number | null> {
  const rows = await t.db.store.read('test.claim', (tx) => tx.query<{ claimed_at: unknown }>(`SELECT claimed_at FROM steps WHERE run_id = $1 AND step_id = $2`, [s.runId, s.stepId]));
  return rows[0].claimed_at === null ? null : Number(rows[0].claimed_at);
}

/** The backoff of the deferred retries below: long, so a retry is due only when a test moves the clock. */
const BACKOFF_MS = 60_000;

/**
 * A push endpoint on 127.0.0.1 that answers every call `completed` with `{pushed: run_id}` and
 * counts the calls by run. `holdNext()` holds the next call unanswered until the returned
 * release (a stuck push); `reached` resolves with that call's run id.
 */
interface PushEndpoint {
  url: string;
  calls: Map<string, number>;
  holdNext(): { reached: Promise<string>; release: () => void };
  close(): Promise<void>;
}

async function startPushEndpoint(): Promise<PushEndpoint> {
  const calls = new Map<string, number>();
  let hold: { reached: (runId: string) => void; released: Promise<void> } | undefined;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      const runId = String(JSON.parse(body).run_id);
      calls.set(runId, (calls.get(runId) ?? 0) + 1);
      const held = hold;
      hold = undefined;
      if (held) {
        held.reached(runId);
        await held.released;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ status: 'completed', result: { pushed: runId }, steps: [] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let releaseHeld: () => void = () => undefined;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    calls,
    holdNext: () => {
      let onReached!: (runId: string) => void;
      const reached = new Promise<string>((resolve) => (onReached = resolve));
      const released = new Promise<void>((resolve) => (releaseHeld = resolve));
      hold = { reached: onReached, released };
      return { reached, release: () => releaseHeld() };
    },
    close: async () => {
      releaseHeld();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Registers push functions `flaky` (retried after {@link BACKOFF_MS}) and `napper` on `url`. */
async function registerRetrying(t: TestEngine, url: string): Promise<void> {
  const retry = { maxAttempts: 2, initialDelayMs: BACKOFF_MS, backoffFactor: 2, maxDelayMs: 300_000 };
  for (const id of ['flaky', 'napper']) {
    await t.engine.api.registerFunction(t.scope, { id, mode: 'push', endpointUrl: url, triggers: [{ event: `go.${id}` }], retry });
  }
}

/** Triggers `flaky`, claims its first attempt and fails it retryably: re-queued, due after the backoff. */
async function retried(t: TestEngine): Promise<string> {
  const { runIds } = await t.engine.api.trigger(t.scope, { event: 'go.flaky', data: {} });
  const [segment] = await t.engine.dispatch.claim({ mode: 'push', limit: 1, project: t.scope.project, env: t.scope.env, functionIds: ['flaky'] }, 'node-a');
  if (segment?.run.id !== runIds[0]) throw new Error(`expected to claim ${runIds[0]}, claimed ${segment?.run.id}`);
  const effect = await t.engine.reports.apply(segment.run.id, { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! }, {
    kind: 'failed',
    error: { message: 'try again', code: 'FLAKY', retryable: true },
  });
  if (effect.effect !== 'retry') throw new Error(`expected a retry, got ${effect.effect}`);
  return segment.run.id;
}

/**
 * The scheduler on a stuck row (specification, "A sleep wakeup gives up on a lock after 1 s … the
 * sweep moves on to the next sleep"; "The recovery skips a locked row"; "A child it dispatches gives
 * up on a lock after 1 s too"): a locked row holds up neither other runs nor the pass, and the work
 * on it lands after the row clears. PostgreSQL only: real row and advisory locks held by a second
 * connection in an open transaction.
 */
describe('the scheduler on a stuck row [postgres]', () => {
  let t: TestEngine;
  const { lock, release, waiters } = testLocker(() => t.db);

  afterEach(async () => {
    await release();
    await t.close();
  });

  describe('sleeps', () => {
    beforeEach(async () => {
      t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS, staleClaimMs: STALE_CLAIM_MS });
      await registerSleeper(t, 'napper');
    });

    it('TestSleepWake_StuckRowDoesNotStopOtherRuns: a due sleep on a locked run row gives up and the sweep wakes the sleeps behind it', async () => {
      const stuck = await sleeping(t, 'napper');
      const others = [await sleeping(t, 'napper'), await sleeping(t, 'napper')];
      await lock(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [stuck.runId]);
      t.db.clock.advance(2000);

      expect(await t.engine.scheduler.sleepSweep()).toBe(2);
      for (const o of others) {
        expect(await readStep(t, o.runId, o.stepId)).toMatchObject({ status: 'completed' });
        expect(await readRun(t, o.runId)).toMatchObject({ status: 'waiting_for_capacity' });
      }
      expect(await readStep(t, stuck.runId, stuck.stepId)).toMatchObject({ status: 'waiting' });
      expect(await readRun(t, stuck.runId)).toMatchObject({ status: 'waiting' });
      // A locked step row is skipped by the claim: the sweep does not wait on it at all.
      await registerSleeper(t, 'dozer'); // its own function, so its claim does not meet the runs woken above
      const skipped = await sleeping(t, 'dozer');
      await lock(`SELECT step_id FROM steps WHERE run_id = $1 FOR UPDATE`, [skipped.runId]);
      t.db.clock.advance(2000);
      expect(await t.engine.scheduler.sleepSweep()).toBe(0);
      expect(await claimedAt(t, skipped)).toBeNull();
      await release();
      expect(await t.engine.scheduler.sleepSweep()).toBe(1);
      expect(await readRun(t, skipped.runId)).toMatchObject({ status: 'waiting_for_capacity' });
    });

    it('TestSleepWake_ClaimedStepOnALockedRowWakesAfterReclaim: the claim of a wakeup that gave up stays until the stale-claim recovery frees it; the next sweep wakes the run', async () => {
      const stuck = await sleeping(t, 'napper');
      await lock(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [stuck.runId]);
      t.db.clock.advance(2000);
      const claimTime = t.db.clock.now();
      expect(await t.engine.scheduler.sleepSweep()).toBe(0);
      expect(await claimedAt(t, stuck)).toBeGreaterThanOrEqual(claimTime);
      await release();

      // Claimed: the sweep leaves it, and a recovery before the claim is stale frees nothing.
      expect(await t.engine.scheduler.sleepSweep()).toBe(0);
      t.db.clock.advance(STALE_CLAIM_MS - 10_000);
      expect(await t.engine.scheduler.staleClaimRecovery()).toBe(0);
      expect(await readStep(t, stuck.runId, stuck.stepId)).toMatchObject({ status: 'waiting' });

      t.db.clock.advance(10_001);
      expect(await t.engine.scheduler.staleClaimRecovery()).toBe(1);
      expect(await claimedAt(t, stuck)).toBeNull();
      expect(await t.engine.scheduler.sleepSweep()).toBe(1);
      expect(await readStep(t, stuck.runId, stuck.stepId)).toMatchObject({ status: 'completed' });
      expect(await readRun(t, stuck.runId)).toMatchObject({ status: 'waiting_for_capacity' });
    });

    it('TestStaleClaimRecovery_SkipsLockedRows: the recovery frees the other stale claims past a locked step row and frees it on a later run', async () => {
      const stuck = await sleeping(t, 'napper');
      const other = await sleeping(t, 'napper');
      // Both wakeups give up on their locked run rows and keep their claims.
      await lock(`SELECT id FROM runs WHERE id IN ($1, $2) FOR UPDATE`, [stuck.runId, other.runId]);
      t.db.clock.advance(2000);
      expect(await t.engine.scheduler.sleepSweep()).toBe(0);
      await release();
      expect(await claimedAt(t, stuck)).not.toBeNull();
      expect(await claimedAt(t, other)).not.toBeNull();

      await lock(`SELECT step_id FROM steps WHERE run_id = $1 FOR UPDATE`, [stuck.runId]);
      t.db.clock.advance(STALE_CLAIM_MS + 1);
      expect(await t.engine.scheduler.staleClaimRecovery()).toBe(1);
      expect(await claimedAt(t, other)).toBeNull();
      expect(await claimedAt(t, stuck)).not.toBeNull();
      expect(await t.engine.scheduler.sleepSweep()).toBe(1);
      expect(await readRun(t, other.runId)).toMatchObject({ status: 'waiting_for_capacity' });

      await release();
      expect(await t.engine.scheduler.staleClaimRecovery()).toBe(1);
      expect(await t.engine.scheduler.sleepSweep()).toBe(1);
      expect(await readRun(t, stuck.runId)).toMatchObject({ status: 'waiting_for_capacity' });
    });

    it('TestSleepWake_StuckDispatchRowDoesNotStopOtherFunctions: with one function\'s lane held, the sweep wakes both functions\' sleeps and the dispatch claims the other function\'s run; no run fails', async () => {
      await registerSleeper(t, 'laned', 1);
      await registerSleeper(t, 'free', 1);
      const held = await sleeping(t, 'laned');
      const other = await sleeping(t, 'free');
      await lock(`SELECT pg_advisory_xact_lock(hashtext($1))`, ['laned:']);
      t.db.clock.advance(2000);

      expect(await t.engine.scheduler.sleepSweep()).toBe(2);
      const claimed = await t.engine.dispatch.claim({ mode: 'push', limit: 10, project: t.scope.project, env: t.scope.env }, 'node-a');
      expect(claimed.map((s) => s.run.id)).toEqual([other.runId]);
      expect(await readRun(t, held.runId)).toMatchObject({ status: 'waiting_for_capacity', error: null });

      await release();
      const later = await t.engine.dispatch.claim({ mode: 'push', limit: 10, project: t.scope.project, env: t.scope.env }, 'node-a');
      expect(later.map((s) => s.run.id)).toEqual([held.runId]);
    });
  });

  /**
   * The deferred-retry replay (specification, "The deferred-retry replay has its own goroutine and
   * no limit. A stall in it, on that row or on any row its dispatch waits on, such as a
   * dispatch_buckets row, holds up other deferred retries and does not stop the wakeups"). This
   * engine has no replay pass of its own: a retryable failure re-queues the run with its backoff
   * (`requeueForRetry`: `waiting_for_capacity`, `available_at` = now + backoff) and the dispatcher
   * claims it once due, on its own loop and with no lock limit (`DispatchSystem.claim`). So the
   * replay here is that claim, and the row its dispatch waits on is the retry's lease row (a lane,
   * our `dispatch_buckets`, is skipped when held, never waited on: see
   * TestSleepWake_StuckDispatchRowDoesNotStopOtherFunctions). A second connection holds an
   * uncommitted lease row of the retried run, so the claim's lease insert waits on it. On SQLite
   * units of work run one at a time, so no claim can wait on a row while a wakeup commits: the
   * test of the same name in "the scheduler's loops" stalls the retry's push instead, on both.
   */
  describe('deferred retries', () => {
    let endpoint: PushEndpoint;

    beforeEach(async () => {
      endpoint = await startPushEndpoint();
      t = await openTestEngine('postgres', { lockLimitMs: LOCK_LIMIT_MS, tickMs: 50, dispatchPollMs: 50 });
      await registerRetrying(t, endpoint.url);
    });
    afterEach(async () => {
      await release(); // before the engine stops: its dispatcher waits for the stalled claim
      await endpoint.close();
    });

    it('TestScheduler_StalledRetryReplayDoesNotStopSleepWakeups: with a due retry\'s claim stuck on its lease row, the sleep loop wakes a sleep of another run; the retries run once the row clears', async () => {
      const stuck = await retried(t);
      const other = await retried(t); // another deferred retry, held up behind the stalled claim
      const nap = await sleeping(t, 'napper', BACKOFF_MS + 30_000); // due only once the claim is stalled
      await lock(`INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at) VALUES ($1, 99, 'stuck-writer', '', 0)`, [stuck]);
      t.db.clock.advance(BACKOFF_MS + 1000); // both retries are due; the sleep is not

      t.engine.start({ pushDispatch: true, scheduler: true });
      await waitFor('the dispatcher\'s claim of the due retries waits on the lease row', async () => (await waiters()) >= 1);
      t.db.clock.advance(30_000); // now the sleep is due
      await waitFor('the sleep loop woke the sleep', async () => (await readStep(t, nap.runId, nap.stepId))?.status === 'completed');
      // The dispatcher is still stuck in that claim: the woken run and both retries wait in the queue.
      expect(await waiters()).toBeGreaterThanOrEqual(1);
      expect(await readRun(t, nap.runId)).toMatchObject({ status: 'waiting_for_capacity' });
      for (const id of [stuck, other]) expect(await readRun(t, id)).toMatchObject({ status: 'waiting_for_capacity', attempt: 2 });
      expect(endpoint.calls.size).toBe(0);

      await release();
      for (const id of [stuck, other, nap.runId]) {
        await waitFor(`run ${id} completed`, async () => (await readRun(t, id))?.status === 'completed');
      }
      for (const id of [stuck, other]) expect(await readRun(t, id)).toMatchObject({ status: 'completed', attempt: 2, output: { pushed: id } });
      expect(Object.fromEntries(endpoint.calls)).toEqual({ [stuck]: 1, [other]: 1, [nap.runId]: 1 });
    });
  });

  describe('pending invocations', () => {
    beforeEach(async () => {
      t = await openTestEngine('postgres', { ...ADMISSION_TEST_CONFIG, lockLimitMs: LOCK_LIMIT_MS }, { bus: 'nats' });
      await registerInvokeFunctions(t);
    });

    it('TestReconcileInvokeChild_StuckDispatchRowDoesNotStopThePass: the pass gives up on a child whose run row is locked and dispatches the others; the child is admitted after the row clears', async () => {
      t.faults.fail({ unit: (name) => name === 'admitRun' }, 2); // both admissions are left to the pass
      const stuck = await reportInvoke(t, 'A', { async: true });
      const other = await reportInvoke(t, 'B', { async: true });
      await drainFollowUps(t.engine);
      await lock(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [stuck.childId]);

      expect(await t.engine.pendingInvokes.run()).toBe(2);
      await drainFollowUps(t.engine);
      expect(await dispatchedUnclaimed(t, other.childId)).toBe(true);
      expect(await readRun(t, other.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
      expect(await readRun(t, stuck.childId)).toMatchObject({ status: 'waiting_for_capacity', held: true, error: null });
      expect(await readRun(t, stuck.parentId)).toMatchObject({ status: 'waiting', error: null });
      expect((await invocation(t, stuck.parentId, stuck.stepId))?.settledAt).toBeNull();

      await release();
      expect(await t.engine.pendingInvokes.run()).toBe(1);
      await drainFollowUps(t.engine);
      expect(await dispatchedUnclaimed(t, stuck.childId)).toBe(true);
      expect(await readRun(t, stuck.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    });

    it('TestReconcileInvokeChild_LockedChildPutsOffItsDispatchFailure: a child refused for good on its locked row does not fail until the row clears; then it fails with its reason and wakes its parent', async () => {
      await t.engine.api.registerFunction(t.scope, { id: 'pchild', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called' });
      const releaseSlots = await takeAllSlots(t.engine); // the report's admission finds no slot: left to the pass
      const { parentId, childId, stepId } = await reportInvoke(t, 'A', { functionId: 'pchild' });
      await t.engine.api.registerFunction(t.scope, { id: 'pchild', mode: 'pull' }); // no endpoint: refused for good
      await drainFollowUps(t.engine);
      releaseSlots();
      await lock(`SELECT id FROM runs WHERE id = $1 FOR UPDATE`, [childId]);

      expect(await t.engine.pendingInvokes.run()).toBe(1);
      await drainFollowUps(t.engine);
      expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true, error: null });
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting', error: null });

      await release();
      expect(await t.engine.pendingInvokes.run()).toBe(1);
      await drainFollowUps(t.engine);
      expect(await readRun(t, childId)).toMatchObject({ status: 'failed', executionSeq: 0, error: { code: 'ADMISSION_REFUSED' } });
      expect(await readStep(t, parentId, stepId)).toMatchObject({ status: 'failed' });
      expect(await readRun(t, parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    });
  });
});

/**
 * The scheduler's loops are independent (specification, "The pass has its own goroutine, so a
 * stall on the sleep sweep does not stop it"). On SQLite and PostgreSQL, with the scheduler's
 * loops running on short ticks; the sleep sweep is held at a pause point.
 */
describe.each(STORES)('the scheduler\'s loops [%s]', (dialect) => {
  let t: TestEngine;
  let endpoint: PushEndpoint | undefined;
  afterEach(async () => {
    await endpoint?.close(); // answers a held push first: the engine's stop waits for it
    endpoint = undefined;
    await t.close();
  });

  /*
   * The same contract as the PostgreSQL test of this name above, with the stall in the retry's
   * push instead of its claim, which needs no row lock and so runs on SQLite too: the push
   * dispatcher (its own loop, one slot here) is stuck on the retry's call to an endpoint that does
   * not answer, so the other due retry waits for the slot, while the sleep loop wakes a sleep.
   */
  it('TestScheduler_StalledRetryReplayDoesNotStopSleepWakeups: with a due retry\'s push stuck at its endpoint and no other push slot, the sleep loop wakes another run\'s sleep; the other retry waits, and all run once the endpoint answers', async () => {
    endpoint = await startPushEndpoint();
    t = await openTestEngine(dialect, { tickMs: 50, dispatchPollMs: 50, pushConcurrency: 1 });
    await registerRetrying(t, endpoint.url);
    const first = await retried(t);
    t.db.clock.advance(10); // the second retry is due after the first, so the dispatcher takes the first
    const second = await retried(t);
    const nap = await sleeping(t, 'napper', BACKOFF_MS + 30_000); // due only once the push is stuck
    const held = endpoint.holdNext();
    t.db.clock.advance(BACKOFF_MS + 1000);

    t.engine.start({ pushDispatch: true, scheduler: true });
    expect(await held.reached).toBe(first);
    t.db.clock.advance(30_000); // now the sleep is due
    await waitFor('the sleep loop woke the sleep', async () => (await readStep(t, nap.runId, nap.stepId))?.status === 'completed');
    expect(await readRun(t, first)).toMatchObject({ status: 'running', attempt: 2 });
    expect(await readRun(t, second)).toMatchObject({ status: 'waiting_for_capacity', attempt: 2 });
    expect(await readRun(t, nap.runId)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(Object.fromEntries(endpoint.calls)).toEqual({ [first]: 1 });

    held.release();
    for (const id of [first, second, nap.runId]) {
      await waitFor(`run ${id} completed`, async () => (await readRun(t, id))?.status === 'completed');
    }
    for (const id of [first, second]) expect(await readRun(t, id)).toMatchObject({ attempt: 2, output: { pushed: id } });
    expect(Object.fromEntries(endpoint.calls)).toEqual({ [first]: 1, [second]: 1, [nap.runId]: 1 });
  });

  it('TestScheduler_StalledSleepSweepDoesNotStopThePass: the waiting-run pass wakes a parent while the sleep sweep is stalled; the sleep wakes once the sweep goes on', async () => {
    t = await openTestEngine(dialect, { tickMs: 50, waitingPassEveryTicks: 2, followUpDrainMs: 1000 });
    await registerParentAndChild(t, 'push');
    await registerSleeper(t, 'napper');
    const nap = await sleeping(t, 'napper');
    const lost = jest.spyOn(t.engine.wakes, 'wakeParent').mockResolvedValue(undefined);
    const parent = await parentWaitingOnChild(t, 'push');
    await endChild(t.engine, t.scope, parent.childId, 'completed');
    lost.mockRestore();
    const stall = t.gate.arm('sleep.beforeWake', nap.runId);
    t.db.clock.advance(2000);

    startScheduler(t.engine);
    await stall.reached;
    await waitFor('the pass woke the parent', async () => (await readStep(t, parent.parentId, parent.stepId))?.status === 'completed');
    expect(await readRun(t, parent.parentId)).toMatchObject({ status: 'waiting_for_capacity' });
    expect(await readStep(t, nap.runId, nap.stepId)).toMatchObject({ status: 'waiting' });

    stall.release();
    await waitFor('the sleep woke', async () => (await readStep(t, nap.runId, nap.stepId))?.status === 'completed');
    expect(await readRun(t, nap.runId)).toMatchObject({ status: 'waiting_for_capacity' });
  });
});

function startScheduler(engine: Engine): void {
  engine.start({ pushDispatch: false, scheduler: true });
}
