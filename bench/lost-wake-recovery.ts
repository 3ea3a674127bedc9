/**
 * Lost parent wake recovery on PostgreSQL with many waiting runs (DESIGN.md "The outcome
 * transaction": the waiting-run pass reads the partial index on `wake_pending` first, so
 * recovering lost wakes costs in proportion to the lost wakes, not to the waiting runs).
 *
 * 1. Bulk load (SQL, `generate_series`, chunks of `--chunk` rows per transaction): `--waiting`
 *    parents in `waiting`, each with a waiting invoke step whose child is `running` (with its
 *    lease). Then ANALYZE, as autovacuum would.
 * 2. One real lost wake, driven through an engine whose follow-ups are dropped after the crash
 *    point: a parent yields `step.invoke`, the node "dies", the child's completion commits
 *    (`wake_pending = 1`) and its parent wake never runs.
 * 3. Page-only sweep (read-only): the specification's pass without the index, page after page of
 *    100 waiting parents from the start, timed, until the page that holds the lost parent and on
 *    to the end. Its bound: ⌈waiting / 100⌉ passes × one pass every 10 ticks of 1 s.
 * 4. A fresh engine (the node after the restart): its first `waitingRunPass()`, timed from the
 *    start of the pass until the parent's invoke step is `completed` (follow-ups drained).
 * 5. `--passes` more passes with no lost wake: the pass's steady cost, and its two reads alone.
 * 6. Burst (`--burst`, default 100; 0 skips): that many lost wakes at once, and how many passes
 *    the fresh engine needs for them (a pass starts a wake only in a free slot).
 *
 * Usage: node dist/bench/lost-wake-recovery.js [--waiting 200000] [--chunk 5000] [--passes 30] [--burst 100]
 */
import { randomBytes } from 'node:crypto';
import { InProcessBus } from '@ironflow/bus';
import { CallScope, JobAssignment } from '@ironflow/contracts';
import { Engine } from '@ironflow/engine';
import { FollowUpTracker } from '@ironflow/follow-up';
import { OpenedStore, Store, openStore, runsSql, stepsSql } from '@ironflow/store';
import { Client } from 'pg';
import { DATABASE_URL, benchSchema, dropSchema, intArg, machineInfo, nowMs, schemaClient, summarize, table, writeResults } from './lib/common';
import { CrashingFollowUpTracker } from '@ironflow/testing';
import { progress } from './lib/progress';

const POOL_SIZE = 10;
const DAY_MS = 86_400_000;

interface LostWake {
  parentId: string;
  childId: string;
  stepId: string;
}

/** Inserts `count` waiting parents with running children, `chunk` rows a transaction. */
async function bulkLoad(client: Client, scope: CallScope, count: number, chunk: number, now: number): Promise<number> {
  const started = nowMs();
  const bar = progress('bulk load ', count);
  const parentId = `md5('bench-parent-' || g)::uuid::text`;
  const childId = `md5('bench-child-' || g)::uuid::text`;
  for (let lo = 1; lo <= count; lo += chunk) {
    const hi = Math.min(count, lo + chunk - 1);
    const params = [scope.project, scope.env, now, lo, hi];
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO runs (id, project, env, function_id, function_version, mode, event_id, status, version, attempt,
         max_attempts, execution_seq, lease_token, available_at, recoveries, parent_run_id, parent_step_id, wake_pending,
         concurrency_key, input, created_at, updated_at, started_at)
       SELECT ${parentId}, $1, $2, 'parent', 1, 'pull', NULL, 'waiting', 3, 1, 1, 1, md5('bench-ptok-' || g), $3, 0,
         NULL, NULL, 0, NULL, '{"order":7}', $3, $3, $3
       FROM generate_series($4::int, $5::int) AS g`,
      params,
    );
    await client.query(
      `INSERT INTO runs (id, project, env, function_id, function_version, mode, event_id, status, version, attempt,
         max_attempts, execution_seq, lease_token, available_at, recoveries, parent_run_id, parent_step_id, wake_pending,
         concurrency_key, input, created_at, updated_at, started_at)
       SELECT ${childId}, $1, $2, 'child', 1, 'pull', NULL, 'running', 2, 1, 1, 1, md5('bench-ctok-' || g), $3, 0,
         ${parentId}, ${parentId} || ':child:0', 0, NULL, '{"n":1}', $3, $3, $3
       FROM generate_series($4::int, $5::int) AS g`,
      params,
    );
    await client.query(
      `INSERT INTO leases (run_id, execution_seq, holder, lane, expires_at)
       SELECT ${childId}, 1, 'bench-worker', 'child:', $1::bigint + ${DAY_MS}
       FROM generate_series($2::int, $3::int) AS g`,
      [now, lo, hi],
    );
    await client.query(
      `INSERT INTO steps (run_id, step_id, name, type, status, child_run_id, timeout_at, sequence, created_at)
       SELECT ${parentId}, ${parentId} || ':child:0', 'child', 'invoke', 'waiting', ${childId}, $1::bigint + ${DAY_MS}, 0, $1
       FROM generate_series($2::int, $3::int) AS g`,
      [now, lo, hi],
    );
    await client.query('COMMIT');
    bar.update(hi);
  }
  bar.stop();
  await client.query('ANALYZE runs');
  await client.query('ANALYZE steps');
  await client.query('ANALYZE leases');
  return nowMs() - started;
}

async function registerFunctions(engine: Engine, scope: CallScope, parent: string, child: string, event: string, worker: string): Promise<void> {
  await engine.api.registerFunction(scope, { id: parent, mode: 'pull', triggers: [{ event }] });
  await engine.api.registerFunction(scope, { id: child, mode: 'pull', retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
  await engine.pull.register(scope, worker, { worker_id: worker, function_ids: [parent, child] });
}

async function pollOne(engine: Engine, worker: string, runId: string): Promise<JobAssignment> {
  const jobs = await engine.pull.poll(worker, 1);
  const job = jobs.find((j) => j.run_id === runId);
  if (!job) throw new Error(`expected the job of ${runId}, polled ${JSON.stringify(jobs.map((j) => j.run_id))}`);
  return job;
}

/**
 * Drives a parent to a sync invoke of `child` and completes the child on `engine`, whose tracker
 * must already drop follow-ups: the child's outcome commits and its parent wake is lost.
 */
async function makeLostWake(engine: Engine, scope: CallScope, event: string, child: string, worker: string): Promise<LostWake> {
  const { runIds } = await engine.api.trigger(scope, { event, data: { order: 7 } });
  const parentId = runIds[0];
  const stepId = `${parentId}:${child}:0`;
  const job = await pollOne(engine, worker, parentId);
  await engine.pull.update(worker, job.job_id, {
    status: 'yielded',
    yield: { type: 'invoke_function', step_id: stepId, function_id: child, input: { n: 1 }, invoke_timeout_ms: DAY_MS },
    execution_seq: job.execution_seq,
    lease_token: job.lease_token,
  });
  const step = await engine.resources.store.read('bench', (tx) => stepsSql.getStep(tx, parentId, stepId));
  const childId = step?.childRunId;
  if (!childId) throw new Error(`parent ${parentId} has no linked child on ${stepId}`);
  const childJob = await pollOne(engine, worker, childId);
  await engine.pull.update(worker, childJob.job_id, { status: 'completed', output: { charged: 42 }, execution_seq: childJob.execution_seq, lease_token: childJob.lease_token });
  return { parentId, childId, stepId };
}

async function stepStatus(store: Store, w: LostWake): Promise<string | undefined> {
  return (await store.read('bench', (tx) => stepsSql.getStep(tx, w.parentId, w.stepId)))?.status;
}

async function explain(client: Client, sql: string, params: unknown[]): Promise<string[]> {
  const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, params);
  return rows.map((r: Record<string, string>) => r['QUERY PLAN']);
}

async function main(): Promise<void> {
  const waiting = intArg('waiting', 200_000);
  const chunk = intArg('chunk', 5000);
  const passes = intArg('passes', 30);
  const burst = intArg('burst', 100, 0);
  const schema = benchSchema('wake');
  const suffix = randomBytes(4).toString('hex');
  const scope: CallScope = { project: `pbench${suffix}`, env: `ebench${suffix}` };
  const startedAt = new Date().toISOString();
  const opened: OpenedStore[] = [];
  const engines: Engine[] = [];
  const open = async () => {
    const o = await openStore({ url: DATABASE_URL, schema, poolSize: POOL_SIZE });
    opened.push(o);
    return o;
  };
  let client: Client | undefined;
  let report: Record<string, unknown> = {};
  try {
    // --- the node that crashes -------------------------------------------------------------
    const first = await open();
    const crashing = new CrashingFollowUpTracker();
    const crashed = new Engine({ store: first.store, clock: first.clock, bus: new InProcessBus(), followUps: crashing, poolSize: POOL_SIZE });
    engines.push(crashed);
    await registerFunctions(crashed, scope, 'parent', 'child', 'go', 'w1');
    client = await schemaClient(schema);
    process.stderr.write(`Lost-wake recovery: ${waiting} waiting runs on PostgreSQL schema ${schema}\n`);
    const loadMs = await bulkLoad(client, scope, waiting, chunk, first.clock.now());

    crashing.crash(); // from here the node dies right after each commit: no follow-up runs
    const lost = await makeLostWake(crashed, scope, 'go', 'child', 'w1');
    await crashed.stop(1000);
    const child = await first.store.read('bench', (tx) => runsSql.getRun(tx, lost.childId));
    if (child?.status !== 'completed' || !child.wakePending) throw new Error(`the child should be completed with wake_pending: ${JSON.stringify(child)}`);
    if ((await stepStatus(first.store, lost)) !== 'waiting') throw new Error('the parent step should still be waiting');
    if (!crashing.dropped.includes('parent-wake')) throw new Error('the parent wake was not dropped');

    const counts = (await client.query(`SELECT
        (SELECT COUNT(*) FROM runs WHERE status = 'waiting') AS waiting,
        (SELECT COUNT(*) FROM runs) AS runs,
        (SELECT COUNT(*) FROM steps) AS steps,
        (SELECT COUNT(*) FROM runs WHERE status = 'waiting' AND id < $1) AS rank`, [lost.parentId])).rows[0];
    const waitingRuns = Number(counts.waiting);
    const rank = Number(counts.rank);

    // --- a fresh node ---------------------------------------------------------------------
    const second = await open();
    const fresh = new Engine({ store: second.store, clock: second.clock, bus: new InProcessBus(), followUps: new FollowUpTracker({ warn: () => undefined }), poolSize: POOL_SIZE });
    engines.push(fresh);
    const config = fresh.resources.config;
    const page = config.passPageSize;
    const passIntervalMs = config.waitingPassEveryTicks * config.tickMs;

    const plans = {
      listWakePending: await explain(client, `SELECT * FROM runs WHERE wake_pending = 1 ORDER BY ended_at, id LIMIT $1`, [page]),
      pageOfWaitingParents: await explain(client, `SELECT id FROM runs WHERE status = 'waiting' AND id > $1 ORDER BY id LIMIT $2`, ['', page]),
      endedInvokeWaitsOfThePage: await (async () => {
        // the page's second read (stepsSql.pageEndedInvokeWaits), on the first page's parents
        const ids = (await client!.query(`SELECT id FROM runs WHERE status = 'waiting' AND id > '' ORDER BY id LIMIT $1`, [page])).rows.map((r: { id: string }) => r.id);
        return explain(
          client!,
          `SELECT s.run_id, s.step_id, s.child_run_id,
                  CASE WHEN EXISTS (SELECT 1 FROM leases l WHERE l.run_id = s.run_id) THEN 1 ELSE 0 END AS parent_leased
             FROM steps s JOIN runs c ON c.id = s.child_run_id
            WHERE s.run_id IN (${ids.map((_: string, i: number) => `$${i + 1}`).join(', ')})
              AND s.type = 'invoke' AND s.status = 'waiting'
              AND c.status IN ('completed', 'failed', 'cancelled')
            ORDER BY s.run_id`,
          ids,
        );
      })(),
    };

    // --- the specification's page-only pass, read-only ---------------------------------------
    const sweepPageMs: number[] = [];
    let cursor = '';
    let foundOnPage = 0;
    const totalPages = Math.ceil(waitingRuns / page);
    const sweepBar = progress('page sweep', totalPages);
    for (let pageNo = 1; ; pageNo += 1) {
      const t0 = nowMs();
      const { waits, nextCursor } = await second.store.read('bench', (tx) => stepsSql.pageEndedInvokeWaits(tx, cursor, page));
      sweepPageMs.push(nowMs() - t0);
      if (!foundOnPage && waits.some((w) => w.parentRunId === lost.parentId)) foundOnPage = pageNo;
      sweepBar.update(Math.min(pageNo, totalPages));
      if (nextCursor === null) break;
      cursor = nextCursor;
    }
    sweepBar.stop();
    const sweepTotalMs = sweepPageMs.reduce((s, v) => s + v, 0);

    // --- the first pass after the crash ------------------------------------------------------
    const t0 = nowMs();
    const started = await fresh.wakes.waitingRunPass();
    const passReturned = nowMs();
    await fresh.resources.followUps.drain(30_000);
    const drained = nowMs();
    const stepAfter = await stepStatus(second.store, lost);
    const parentAfter = await second.store.read('bench', (tx) => runsSql.getRun(tx, lost.parentId));
    const childAfter = await second.store.read('bench', (tx) => runsSql.getRun(tx, lost.childId));
    const recoveredInFirstPass = started === 1 && stepAfter === 'completed' && parentAfter?.status === 'waiting_for_capacity' && childAfter?.wakePending === false;
    if (!recoveredInFirstPass) {
      throw new Error(`the first pass did not recover the lost wake: started ${started}, step ${stepAfter}, parent ${parentAfter?.status}, wake_pending ${childAfter?.wakePending}`);
    }
    const firstPass = { wakesStarted: started, passMs: passReturned - t0, recoveryMs: drained - t0 };

    // --- steady passes with no lost wake -------------------------------------------------------
    const steadyPass: number[] = [];
    let steadyStarted = 0;
    for (let i = 0; i < passes; i += 1) {
      const p0 = nowMs();
      steadyStarted += await fresh.wakes.waitingRunPass();
      await fresh.resources.followUps.drain(30_000);
      steadyPass.push(nowMs() - p0);
    }
    const indexRead: number[] = [];
    const pageRead: number[] = [];
    cursor = '';
    for (let i = 0; i < passes; i += 1) {
      let q0 = nowMs();
      await second.store.read('bench', (tx) => runsSql.listWakePending(tx, page));
      indexRead.push(nowMs() - q0);
      q0 = nowMs();
      const { nextCursor } = await second.store.read('bench', (tx) => stepsSql.pageEndedInvokeWaits(tx, cursor, page));
      pageRead.push(nowMs() - q0);
      cursor = nextCursor ?? '';
    }

    // --- a burst of lost wakes -----------------------------------------------------------------
    let burstResult: Record<string, unknown> | null = null;
    if (burst > 0) {
      const third = await open();
      const crashing2 = new CrashingFollowUpTracker();
      const crashed2 = new Engine({ store: third.store, clock: third.clock, bus: new InProcessBus(), followUps: crashing2, poolSize: POOL_SIZE });
      engines.push(crashed2);
      await registerFunctions(crashed2, scope, 'bparent', 'bchild', 'burst', 'w2');
      crashing2.crash();
      const lostWakes: LostWake[] = [];
      const bar = progress('burst     ', burst);
      for (let i = 0; i < burst; i += 1) {
        lostWakes.push(await makeLostWake(crashed2, scope, 'burst', 'bchild', 'w2'));
        bar.update(i + 1);
      }
      bar.stop();
      await crashed2.stop(1000);
      const perPass: number[] = [];
      const b0 = nowMs();
      for (let pass = 1; pass <= burst + 5; pass += 1) {
        perPass.push(await fresh.wakes.waitingRunPass());
        await fresh.resources.followUps.drain(30_000);
        const statuses = await Promise.all(lostWakes.map((w) => stepStatus(second.store, w)));
        if (statuses.every((s) => s === 'completed')) break;
      }
      const statuses = await Promise.all(lostWakes.map((w) => stepStatus(second.store, w)));
      burstResult = {
        lostWakes: burst,
        wakeSlots: fresh.resources.wakeSlots.size,
        passesNeeded: perPass.length,
        allRecovered: statuses.every((s) => s === 'completed'),
        wakesStartedPerPass: perPass,
        totalPassTimeMs: round(nowMs() - b0),
        atDefaultPassIntervalS: (perPass.length * passIntervalMs) / 1000,
      };
    }

    const specPasses = Math.ceil(waitingRuns / page);
    report = {
      benchmark: 'lost-wake-recovery',
      startedAt,
      machine: await machineInfo(),
      parameters: { waiting, chunk, passes, burst, poolSize: POOL_SIZE, passPageSize: page, tickMs: config.tickMs, waitingPassEveryTicks: config.waitingPassEveryTicks, wakeSlots: fresh.resources.wakeSlots.size },
      data: { waitingRuns, runs: Number(counts.runs), steps: Number(counts.steps), bulkLoadMs: round(loadMs) },
      lostWake: { ...lost, rankAmongWaitingParents: rank, inFirstPageOfTheFreshPass: rank < page },
      firstPassAfterCrash: { ...roundAll(firstPass), recoveredInFirstPass },
      steadyPassNoLostWakeMs: summarize(steadyPass),
      steadyWakesStarted: steadyStarted,
      readsAloneMs: { listWakePending: summarize(indexRead), pageEndedInvokeWaits: summarize(pageRead) },
      pageOnlySweep: {
        pages: sweepPageMs.length,
        lostParentFoundOnPage: foundOnPage,
        pageMs: summarize(sweepPageMs),
        totalDbMs: round(sweepTotalMs),
        specPassBound: {
          passes: specPasses,
          passIntervalS: passIntervalMs / 1000,
          worstCaseS: (specPasses * passIntervalMs) / 1000,
          thisRunS: (foundOnPage * passIntervalMs) / 1000,
        },
      },
      withIndex: { passes: 1, worstCaseS: passIntervalMs / 1000 },
      burst: burstResult,
      plans,
    };
  } finally {
    for (const engine of engines) await engine.stop(1000).catch(() => undefined);
    await client?.end().catch(() => undefined);
    for (const o of opened) await o.store.close().catch(() => undefined);
    await dropSchema(schema);
  }
  print(report);
  console.log(`\nwrote ${writeResults('lost-wake-recovery', report)}`);
}

function print(r: Record<string, any>): void {
  const f = r.firstPassAfterCrash;
  const s = r.pageOnlySweep;
  const b = s.specPassBound;
  console.log(`\nLost-wake recovery on PostgreSQL (${r.data.waitingRuns} waiting runs, ${r.data.runs} runs, ${r.data.steps} steps; bulk load ${(r.data.bulkLoadMs / 1000).toFixed(1)} s)\n`);
  console.log(table([
    ['figure', 'ms'],
    ['first pass after the crash: pass returned', f.passMs],
    ['first pass after the crash: lost wake recovered (step completed)', f.recoveryMs],
    ['pass with no lost wake, p50', r.steadyPassNoLostWakeMs.p50],
    ['pass with no lost wake, p99', r.steadyPassNoLostWakeMs.p99],
    ['  its wake_pending index read, p50', r.readsAloneMs.listWakePending.p50],
    ['  its page of 100 waiting parents, p50', r.readsAloneMs.pageEndedInvokeWaits.p50],
  ]));
  console.log(`\nRecovered within the first pass after the crash: ${f.recoveredInFirstPass ? 'yes' : 'NO'} (wakes started: ${f.wakesStarted}; the lost parent ranks ${r.lostWake.rankAmongWaitingParents} of ${r.data.waitingRuns} by id, ${r.lostWake.inFirstPageOfTheFreshPass ? 'inside' : 'outside'} the pass's first page).`);
  console.log(`With the wake_pending index: 1 pass, so at most one pass interval (${r.withIndex.worstCaseS} s) after the restart.`);
  console.log(`Spec pass bound (page-only, no index): up to ⌈${r.data.waitingRuns}/${r.parameters.passPageSize}⌉ = ${b.passes} passes × ${b.passIntervalS} s (a pass every ${r.parameters.waitingPassEveryTicks} ticks of ${r.parameters.tickMs} ms) = ${b.worstCaseS} s (${(b.worstCaseS / 3600).toFixed(1)} h).`);
  console.log(`  Page-only sweep measured: ${s.pages} pages, ${(s.totalDbMs / 1000).toFixed(2)} s of reads (p50 ${s.pageMs.p50} ms a page); this run's lost parent is on page ${s.lostParentFoundOnPage} → ${b.thisRunS} s at the default interval.`);
  if (r.burst) {
    const x = r.burst;
    console.log(`Burst: ${x.lostWakes} lost wakes at once needed ${x.passesNeeded} passes (wakes started per pass: ${x.wakesStartedPerPass.join(', ')}; ${x.wakeSlots} wake slots with a pool of ${r.parameters.poolSize}) → ${x.atDefaultPassIntervalS} s at the default pass interval; all recovered: ${x.allRecovered}.`);
  }
}

function round(v: number): number {
  return Math.round(v * 100) / 100;
}

function roundAll<T extends Record<string, number>>(o: T): T {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, round(v)])) as T;
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
