/**
 * `cancel_on` under load on PostgreSQL and NATS JetStream (the benchmark): `--waiting`
 * runs wait (10,000 by default), each of a function with `cancelOn: [{event: 'bench.cancelled',
 * match: 'data.orderId'}]` and its own order id; then `--rate` cancel events a second (1,000) are
 * emitted for `--seconds` (10), each naming one waiting run's order. It measures each cancel's
 * latency two ways:
 *
 * - commit: from the event's commit (`events.ts`) to the run's cancel commit (`runs.ended_at`),
 *   both on the store's clock;
 * - announced: from the start of the emitting call to the arrival of the run's RESULTS frame.
 *
 * Then it checks that no run a cancel matched is left waiting, and that no other run was cancelled.
 *
 * 1. Bulk load (SQL, `generate_series`, `--chunk` rows a transaction): the waiting runs, each with
 *    a sleep step due in a day and its `cancel_on_specs` row, as the engine writes them.
 * 2. Emit at the rate, open loop (at most `--inflight` emits outstanding; the output says the rate
 *    reached), through `engine.api.trigger`, as the API does: each event's live match runs after
 *    its commit, off the emitter's path.
 * 3. Wait for every matched run to end (up to `--settle-ms`), then read the store.
 *
 * Usage: node dist/bench/cancel-on-latency.js [--waiting 10000] [--rate 1000] [--seconds 10] [--inflight 64] [--chunk 5000] [--settle-ms 60000]
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { NatsBus, subjects } from '@ironflow/bus';
import { CallScope } from '@ironflow/contracts';
import { Engine } from '@ironflow/engine';
import { openStore } from '@ironflow/store';
import { Client } from 'pg';
import { DATABASE_URL, NATS_URL, benchSchema, dropSchema, intArg, machineInfo, nowMs, purgeScope, schemaClient, sleep, summarize, table, writeResults } from './lib/common';
import { CountingStore, perCall } from './lib/counting-store';
import { progress } from './lib/progress';

const FUNCTION_ID = 'bench.order';
const PLACED = 'bench.placed';
const CANCELLED = 'bench.cancelled';
const DAY_MS = 86_400_000;

const orderId = (i: number) => `O-${i}`;

/** Inserts `count` waiting runs with a sleep step and their `cancel_on_specs` row, `chunk` a transaction. */
async function bulkLoad(client: Client, scope: CallScope, count: number, chunk: number, now: number): Promise<number> {
  const started = nowMs();
  const bar = progress('bulk load ', count);
  const runId = `md5('bench-run-' || g)::uuid::text`;
  for (let lo = 1; lo <= count; lo += chunk) {
    const hi = Math.min(count, lo + chunk - 1);
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO runs (id, project, env, function_id, function_version, mode, event_id, status, version, attempt,
         max_attempts, execution_seq, lease_token, available_at, recoveries, wake_pending, input, created_at, updated_at, started_at)
       SELECT ${runId}, $1, $2, '${FUNCTION_ID}', 1, 'pull', NULL, 'waiting', 3, 1, 1, 1, md5('bench-tok-' || g), $3, 0, 0,
         json_build_object('orderId', 'O-' || g)::text, $3, $3, $3
       FROM generate_series($4::int, $5::int) AS g`,
      [scope.project, scope.env, now, lo, hi],
    );
    await client.query(
      `INSERT INTO steps (run_id, step_id, name, type, status, wake_at, sequence, created_at)
       SELECT ${runId}, ${runId} || ':nap:0', 'nap', 'sleep', 'waiting', $1::bigint + ${DAY_MS}, 0, $1
       FROM generate_series($2::int, $3::int) AS g`,
      [now, lo, hi],
    );
    await client.query(
      `INSERT INTO cancel_on_specs (run_id, spec_index, project, env, event_name, match_path, match_value, created_at)
       SELECT ${runId}, 0, $1, $2, '${CANCELLED}', 'data.orderId', to_json('O-' || g)::text, $3
       FROM generate_series($4::int, $5::int) AS g`,
      [scope.project, scope.env, now, lo, hi],
    );
    await client.query('COMMIT');
    bar.update(hi);
  }
  bar.stop();
  for (const t of ['runs', 'steps', 'cancel_on_specs', 'events']) await client.query(`ANALYZE ${t}`);
  return nowMs() - started;
}

async function main(): Promise<void> {
  const waiting = intArg('waiting', 10_000);
  const rate = intArg('rate', 1000);
  const seconds = intArg('seconds', 10);
  const inflightCap = intArg('inflight', 64);
  const chunk = intArg('chunk', 5000);
  const settleMs = intArg('settle-ms', 60_000);
  const total = rate * seconds;
  if (total > waiting) throw new Error(`--rate × --seconds (${total}) must not exceed --waiting (${waiting}): each event cancels one run`);

  const schema = benchSchema('cancelon');
  const suffix = randomBytes(4).toString('hex');
  const scope: CallScope = { project: `pbench${suffix}`, env: `ebench${suffix}` };
  const poolSize = 10;
  const opened = await openStore({ url: DATABASE_URL, schema, poolSize });
  const bus = await NatsBus.connect({ url: NATS_URL, name: 'ironflow-bench-cancel-on' });
  const store = new CountingStore(opened.store);
  const engine = new Engine({ store, clock: opened.clock, bus, poolSize });
  const client = await schemaClient(schema);
  const startedAt = new Date().toISOString();
  const emitStart = new Map<string, number>();
  const framed = new Map<string, number>();
  const announced: number[] = [];
  let emitted = 0;
  let emitErrors = 0;
  let loadMs = 0;
  let emitMs = 0;
  let settledMs = 0;
  let countsBefore = store.snapshot();
  let countsAfter = countsBefore;
  try {
    await engine.api.registerFunction(scope, { id: FUNCTION_ID, mode: 'pull', triggers: [{ event: PLACED }], cancelOn: [{ event: CANCELLED, match: 'data.orderId' }] });
    loadMs = await bulkLoad(client, scope, waiting, chunk, opened.clock.now());
    const orderOf = new Map<string, string>();
    for (const r of (await client.query<{ id: string; input: string }>(`SELECT id, input FROM runs WHERE function_id = $1`, [FUNCTION_ID])).rows) {
      orderOf.set(r.id, JSON.parse(r.input).orderId);
    }
    const sub = bus.subscribe(subjects.result(scope.project, scope.env, '*'), (m) => {
      const runId = (m.data as { runId?: string }).runId;
      const order = runId ? orderOf.get(runId) : undefined;
      if (!order || framed.has(order)) return;
      const at = nowMs();
      framed.set(order, at);
      const start = emitStart.get(order);
      if (start !== undefined) announced.push(at - start);
    });

    countsBefore = store.snapshot();
    process.stderr.write(`cancel_on: ${waiting} waiting runs, ${rate} cancel events/s for ${seconds} s (at most ${inflightCap} emits outstanding), PostgreSQL schema ${schema}, NATS ${NATS_URL}\n`);
    const bar = progress('emit      ', total);
    const begin = nowMs();
    const outstanding = new Set<Promise<void>>();
    for (let i = 1; i <= total; i += 1) {
      // Open loop: event i is due at begin + (i - 1) / rate seconds.
      const due = begin + ((i - 1) * 1000) / rate;
      const wait = due - nowMs();
      if (wait > 1) await sleep(wait);
      while (outstanding.size >= inflightCap) await Promise.race(outstanding);
      const order = orderId(i);
      emitStart.set(order, nowMs());
      const p: Promise<void> = engine.api.trigger(scope, { event: CANCELLED, data: { orderId: order } })
        .then(() => { emitted += 1; }, () => { emitErrors += 1; })
        .finally(() => { outstanding.delete(p); bar.update(emitted + emitErrors); });
      outstanding.add(p);
    }
    await Promise.all(outstanding);
    emitMs = nowMs() - begin;
    bar.stop();

    const settleStart = nowMs();
    for (;;) {
      const left = Number((await client.query<{ n: string }>(
        `SELECT COUNT(*) AS n FROM runs r JOIN events e ON e.name = $1 AND (e.data::json->>'orderId') = (r.input::json->>'orderId')
         WHERE r.function_id = $2 AND r.status <> 'cancelled'`,
        [CANCELLED, FUNCTION_ID],
      )).rows[0].n);
      if (left === 0 || nowMs() - settleStart > settleMs) break;
      await sleep(100);
    }
    await engine.resources.followUps.drain(settleMs);
    settledMs = nowMs() - settleStart;
    countsAfter = store.snapshot();
    sub.unsubscribe();
  } finally {
    await engine.stop(5000);
    await sleep(50);
  }

  // What the store says: each matched run's cancel commit against its event's commit.
  const commit = (await client.query<{ lat: string }>(
    `SELECT r.ended_at - e.ts AS lat FROM runs r JOIN events e ON e.name = $1 AND (e.data::json->>'orderId') = (r.input::json->>'orderId')
     WHERE r.function_id = $2 AND r.status = 'cancelled'`,
    [CANCELLED, FUNCTION_ID],
  )).rows.map((r) => Number(r.lat));
  const counts = (await client.query<{ status: string; matched: boolean; n: string }>(
    `SELECT r.status, (e.id IS NOT NULL) AS matched, COUNT(*) AS n FROM runs r
       LEFT JOIN events e ON e.name = $1 AND (e.data::json->>'orderId') = (r.input::json->>'orderId')
     WHERE r.function_id = $2 GROUP BY r.status, (e.id IS NOT NULL)`,
    [CANCELLED, FUNCTION_ID],
  )).rows;
  const count = (status: string, matched: boolean) => Number(counts.find((c) => c.status === status && c.matched === matched)?.n ?? 0);
  const matchedLeftWaiting = counts.filter((c) => c.matched && c.status !== 'cancelled').reduce((s, c) => s + Number(c.n), 0);
  const unmatchedCancelled = count('cancelled', false);
  const auditRows = Number((await client.query<{ n: string }>(`SELECT COUNT(*) AS n FROM audit_events WHERE event_type = 'run.cancelled' AND cause = 'cancel-on-event'`)).rows[0].n);
  await client.end();
  await bus.close();
  await store.close();
  await dropSchema(schema);
  await purgeScope(NATS_URL, scope.project, scope.env).catch(() => undefined);

  const commitMs = summarize(commit);
  const announcedMs = summarize(announced);
  console.log(`\ncancel_on: ${waiting} waiting runs, ${rate} cancel events/s for ${seconds} s (PostgreSQL + NATS, one engine in-process)\n`);
  console.log(table([
    ['latency', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms', 'max ms'],
    ['event commit → cancel commit', commitMs.n, commitMs.p50, commitMs.p90, commitMs.p99, commitMs.mean, commitMs.max],
    ['emit call → RESULTS frame', announcedMs.n, announcedMs.p50, announcedMs.p90, announcedMs.p99, announcedMs.mean, announcedMs.max],
  ]));
  const reached = Math.round((emitted / (emitMs / 1000)) * 10) / 10;
  console.log(`\nemitted ${emitted} events (${emitErrors} errors) in ${(emitMs / 1000).toFixed(2)} s: ${reached} events/s (target ${rate}); all settled ${(settledMs / 1000).toFixed(2)} s after the last emit`);
  console.log(`runs a cancel matched left waiting: ${matchedLeftWaiting}; runs cancelled that no cancel matched: ${unmatchedCancelled}; run.cancelled rows (cancel-on-event): ${auditRows} (the rest dropped and counted by the audit recorder)`);
  const units = perCall(countsBefore.units, countsAfter.units, Math.max(1, emitted));
  const reads = perCall(countsBefore.reads, countsAfter.reads, Math.max(1, emitted));
  const costRows: (string | number)[][] = [['per cancel event', 'count', 'mean ms']];
  for (const [name, v] of Object.entries(units)) costRows.push([`${name} unit`, v.perCall, v.meanMs]);
  for (const [name, v] of Object.entries(reads)) costRows.push([`${name} read`, v.perCall, v.meanMs]);
  console.log(`\n${table(costRows)}`);
  const path = writeResults('cancel-on-latency', {
    startedAt,
    machine: await machineInfo(),
    parameters: { waiting, rate, seconds, inflight: inflightCap, chunk, settleMs, poolSize },
    bulkLoadMs: Math.round(loadMs),
    emitted,
    emitErrors,
    emitSeconds: emitMs / 1000,
    reachedEventsPerSecond: reached,
    settledMsAfterLastEmit: Math.round(settledMs),
    latencyMs: { eventCommitToCancelCommit: commitMs, emitCallToResultsFrame: announcedMs },
    matchedLeftWaiting,
    unmatchedCancelled,
    runCancelledAuditRows: auditRows,
    perEvent: { unitsOfWork: units, reads },
    loadAverage: loadavg(),
  });
  console.log(`\nresults: ${path}`);
  if (matchedLeftWaiting > 0 || unmatchedCancelled > 0) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
