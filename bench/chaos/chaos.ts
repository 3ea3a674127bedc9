/**
 * Chaos run (issue 10 item 5): the five services as separate processes (two dispatchers) on
 * PostgreSQL and NATS, with a database and an `IRONFLOW_CLUSTER_ID` of their own, and real
 * workers (stream workers on each dispatcher, a push endpoint). It starts `--runs` runs mixing
 * invokes (a pull parent invoking a push child), sleeps, `waitForEvent`s approved by the
 * benchmark, runs the benchmark cancels, and push runs called with TriggerSync (which the
 * api-gateway claims and calls itself, so a gateway kill can cut a push call); every `--kill-every-ms` it kills a random service
 * with SIGKILL and starts it again; once, about a third of the way in, it restarts PostgreSQL.
 *
 * The counters come from the rows of its own database: triggers it installs on `runs` and `steps`
 * (`OutcomeWatch`) log every terminal commit, every later write to an ended run and every wait
 * resolved twice; leases are counted `--lease-wait-s` after the last run ended; audit rows lost are
 * the engine's own count (`ironflow_audit_write_failures_total`, read before each kill) and the
 * rows missing against the runs (a `run.created` and a terminal row each). It exits 1 when a counter
 * that must be 0 is not.
 *
 * Usage: node dist/bench/chaos/chaos.js [--runs 2000] [--emit-seconds 60] [--kill-every-ms 5000]
 *   [--victims audit-writer,…] [--lease-ms 5000] [--lease-wait-s 120] [--timeout-s 900] [--no-pg-restart]
 *   [--pg-restart-cmd "pg_ctlcluster --skip-systemctl-redirect 15 main restart"] [--out chaos] [--keep]
 */
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { Pool } from 'pg';
import { BusNamespace } from '@ironflow/bus';
import { createClient } from '@ironflow/sdk';
import { OutcomeWatch, OutcomeWatchReport, dropNamespaceStreams } from '@ironflow/testing';
import { DATABASE_URL, NATS_URL, flagArg, intArg, machineInfo, runBenchmark, sleep, stringArg, table, writeResults } from '../lib/common';
import { progress } from '../lib/progress';
import { ChaosCluster, restartPostgres } from './cluster';
import { ChaosDrivers, ChaosWorkers, KINDS, SyncCallers, executions, kindOf, persist } from './workload';

const TERMINAL = `('completed', 'failed', 'cancelled')`;

/** The machine's PostgreSQL cluster restarted the Debian way (the one `.ci/run` starts). */
function defaultRestartCommand(): string {
  let version = '15';
  try {
    version = readdirSync('/etc/postgresql')[0] ?? version;
  } catch {
    // not a Debian layout: pass --pg-restart-cmd
  }
  return `pg_ctlcluster --skip-systemctl-redirect ${version} main restart`;
}

async function createDatabase(name: string): Promise<string> {
  const admin = new Pool({ connectionString: DATABASE_URL, max: 1 });
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function dropDatabase(name: string): Promise<void> {
  const admin = new Pool({ connectionString: DATABASE_URL, max: 1 });
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** A query that waits out a PostgreSQL restart (tries again every 200 ms until `deadline`). */
async function query<T>(db: Pool, sql: string, deadline: number, params: unknown[] = []): Promise<T[]> {
  return persist('query', async () => (await db.query(sql, params)).rows as T[], deadline);
}

interface Counters {
  runsStarted: number;
  runsCompleted: number;
  runsFailed: number;
  runsCancelled: number;
  runsUnfinished: number;
  duplicateRuns: number;
  unexpectedOutcomes: number;
  wrongOutputs: number;
  outcomesReplaced: number;
  parentsWokenTwice: number;
  waitsResolvedTwice: number;
  childrenNotWoken: number;
  leasesHeldAfterWait: number;
  auditRowsCountedLost: number;
  auditRowsCountedLostChecked: number;
  auditRowsMissing: number;
  auditRowsPendingAtKills: number;
  auditRowsUnansweredButStored: number;
  auditRowsUnansweredUnknown: number;
  /** Sync calls answered with an ended run whose answer is not that run's committed row (run id, status, output), or that never answered. */
  syncAnswersWrong: number;
  /** Sync calls that threw (the gateway killed or draining during the call), each repeated with the same key. */
  syncCallFailures: number;
  /** Sync runs with at least one failed call. */
  syncRunsWithFailedCalls: number;
  /** Sync runs whose lease was recovered (`runs.recoveries` > 0): their claimer died during the call, a dispatcher called them again. */
  syncRunsRecovered: number;
  /** Sync calls answered at their 10 s deadline with the run still going (repeated). */
  syncCallsUnended: number;
  /** Sync calls in flight at the api-gateway's kills (summed over the kills). */
  syncCallsAtGatewayKills: number;
  /** Push segments the api-gateway claimed itself (its `ironflow_segments_dispatched_total{mode="push"}`, over its lives): the sync runs it called. */
  syncSegmentsClaimedByGateway: number;
  /** Sync triggers the api-gateway handed to a dispatcher (`ironflow_trigger_forwards_total`, every result, over its lives). */
  syncTriggersForwarded: number;
}

/** The audit rows `auditRowsMissing` looks for: each run's `run.created` and its terminal row. */
const CHECKED_AUDIT_TYPES = ['run.created', 'run.status_changed', 'run.cancelled'];

/** The audit figures behind the counters, by event type (in the JSON). */
interface AuditDetail {
  countedLostByEventType: Record<string, number>;
  /** Rows of writes that got no answer, by what the sender learned (`written`, `given_up`, `unknown`). */
  unansweredByFate: Record<string, number>;
  missingCreated: number;
  missingTerminal: number;
}

/** The counters that must be 0 (the run exits 1 otherwise). */
const MUST_BE_ZERO: (keyof Counters)[] = ['runsUnfinished', 'duplicateRuns', 'outcomesReplaced', 'parentsWokenTwice', 'waitsResolvedTwice', 'leasesHeldAfterWait', 'wrongOutputs', 'syncAnswersWrong'];

async function main(): Promise<void> {
  const runs = intArg('runs', 2000);
  const emitSeconds = intArg('emit-seconds', 60);
  const killEveryMs = intArg('kill-every-ms', 5000, 100);
  const leaseMs = intArg('lease-ms', 5000, 100);
  const leaseWaitS = intArg('lease-wait-s', 120, 0);
  const timeoutS = intArg('timeout-s', 900);
  const pgRestart = !flagArg('no-pg-restart');
  const pgRestartCmd = stringArg('pg-restart-cmd') ?? defaultRestartCommand();
  const out = stringArg('out') ?? 'chaos';
  const keep = flagArg('keep');
  // The services a kill may pick (`--victims audit-writer,api-gateway`); default every one.
  const victims = stringArg('victims')?.split(',').map((v) => v.trim()).filter((v) => v !== '');
  const apps = ['api-gateway', 'dispatcher', 'scheduler', 'capacity-scanner', 'audit-writer'];
  const unknown = (victims ?? []).filter((v) => !apps.includes(v));
  if (unknown.length > 0 || victims?.length === 0) throw new Error(`--victims: ${unknown.join(', ') || '(none)'} is not one of ${apps.join(', ')}`);
  const startedAt = new Date().toISOString();
  const deadline = Date.now() + timeoutS * 1000;

  const suffix = randomBytes(4).toString('hex');
  const dbName = `ironflow_chaos_${suffix}`;
  const clusterId = `chaos-${suffix}`;
  const env = `chaos${suffix}`;
  const databaseUrl = await createDatabase(dbName);
  const db = new Pool({ connectionString: databaseUrl, max: 4 });
  db.on('error', () => undefined); // a PostgreSQL restart ends idle clients; the next query reconnects
  const cluster = new ChaosCluster({ databaseUrl, natsUrl: NATS_URL, clusterId, leaseMs });
  const workers = new ChaosWorkers();
  let drivers: ChaosDrivers | undefined;
  let sync: SyncCallers | undefined;
  let chaos: Promise<void> | undefined;
  let stopChaos = false;
  const events: { at: number; what: string }[] = [];
  const t0 = Date.now();
  let failed: string | undefined;
  let chaosError: string | undefined;
  const note = (what: string): void => void events.push({ at: Math.round((Date.now() - t0) / 100) / 10, what });
  // What the JSON holds if the run ends with an exception: what is known by then, and the error.
  const partial: Record<string, unknown> = {
    benchmark: 'chaos',
    startedAt,
    parameters: { runs, emitSeconds, killEveryMs, leaseMs, leaseWaitS, timeoutS, pgRestart, pgRestartCmd: pgRestart ? pgRestartCmd : undefined, victims: victims ?? 'all' },
  };
  let written = false;
  try {
    console.error(`chaos: database ${dbName}, IRONFLOW_CLUSTER_ID ${clusterId}, env ${env}; starting the services`);
    await cluster.start();
    const watch = await OutcomeWatch.install(databaseUrl);
    await workers.start(cluster.gateway.url, env, cluster.dispatchers.map((d) => d.url));
    drivers = new ChaosDrivers(db, cluster.gateway.url, env, deadline);
    drivers.start();
    const client = createClient({ serverUrl: cluster.gateway.url, environment: env, timeoutMs: 5000 });
    const syncCallers = new SyncCallers(client, deadline, () => chaosError !== undefined);
    sync = syncCallers;

    // The chaos: a random service killed and restarted every killEveryMs; PostgreSQL once.
    const pgRestartAt = Date.now() + (emitSeconds * 1000) / 3;
    let pgRestarted = !pgRestart;
    let pgDownMs: number | undefined;
    // killEveryMs after the previous victim is ready again, the next one is killed (one service
    // down at a time, as a rolling failure; a restart takes seconds on a loaded machine). The
    // PostgreSQL restart takes one turn.
    chaos = (async () => {
      while (!stopChaos) {
        await sleep(killEveryMs);
        if (stopChaos) break;
        if (!pgRestarted && Date.now() >= pgRestartAt) {
          pgRestarted = true;
          note(`PostgreSQL restart: ${pgRestartCmd}`);
          pgDownMs = await restartPostgres(pgRestartCmd, databaseUrl);
          note(`PostgreSQL back after ${pgDownMs} ms`);
          continue;
        }
        const pool = victims ? cluster.processes.filter((p) => typeof p.app === 'string' && victims.includes(p.app)) : cluster.processes;
        const victim = pool[Math.floor(Math.random() * pool.length)];
        note(`kill -9 ${victim.app}:${victim.port}`);
        if (victim.app === 'api-gateway') syncCallers.gatewayKilled();
        await cluster.killAndRestart(victim);
        note(`${victim.app}:${victim.port} ready again`);
      }
    })().catch((err: unknown) => {
      // A service that cannot start again, or PostgreSQL that does not come back: the run stops
      // waiting and fails, saying why.
      chaosError = String(err);
      note(`chaos stopped: ${chaosError}`);
      stopChaos = true;
    });

    // Start the runs, spread over emitSeconds, ten at a time; each emit is repeated until the
    // gateway takes it (an idempotency key per run, so a repeat never starts a second run).
    const bar = progress('chaos runs ended', runs);
    const emitStart = Date.now();
    let next = 0;
    const emitter = async () => {
      for (let i = next++; i < runs; i = next++) {
        const due = emitStart + (i / runs) * emitSeconds * 1000;
        if (due > Date.now()) await sleep(due - Date.now());
        const kind = kindOf(i);
        if (chaosError) return;
        if (kind === 'sync') {
          // TriggerSync, repeated beside the emitters until it answers an ended run.
          syncCallers.start(i);
          continue;
        }
        await persist(`emit run ${i}`, () => client.emit(KINDS[kind].event, { n: i, key: `k${i}` }, { idempotencyKey: `run-${i}` }), deadline, () => chaosError !== undefined).catch((err) => {
          if (!chaosError) throw err;
        });
      }
    };
    const emitting = Promise.all(Array.from({ length: 10 }, emitter));
    // Handled at once: an emit that fails while the loop below waits would otherwise be an
    // unhandled rejection, which ends the process with no JSON and no clean-up. It is thrown
    // where `emitting` is awaited.
    let emitFailed = false;
    emitting.catch(() => { emitFailed = true; });
    let ended = 0;
    for (;;) {
      ended = Number((await query<{ n: number }>(db, `SELECT COUNT(*)::int AS n FROM runs WHERE parent_run_id IS NULL AND status IN ${TERMINAL}`, deadline))[0].n);
      bar.update(ended);
      if (ended >= runs || Date.now() > deadline || chaosError || emitFailed) break;
      await sleep(500);
    }
    bar.stop();
    await emitting;
    await syncCallers.settled().catch((err) => {
      if (!chaosError && Date.now() <= deadline) throw err;
    });
    stopChaos = true;
    await chaos;
    await drivers.stop();
    note(`${ended} runs ended; chaos stopped`);
    if (!pgRestarted) note('PostgreSQL restart not reached: the runs ended before it was due');

    // Leases: none may be left once the lease period has passed (every service is up again).
    const leaseDeadline = Date.now() + leaseWaitS * 1000;
    let leases = 0;
    for (;;) {
      leases = Number((await query<{ n: number }>(db, `SELECT COUNT(*)::int AS n FROM leases`, deadline + leaseWaitS * 1000))[0].n);
      if (leases === 0 || Date.now() >= leaseDeadline) break;
      await sleep(500);
    }
    note(`leases: ${leases} left`);

    const { counters, audit } = await countAll(db, watch, cluster, syncCallers, runs, leases, deadline + leaseWaitS * 1000 + 60_000);
    partial.counters = counters;
    partial.audit = audit;
    const byKind = await query<{ function_id: string; status: string; n: number }>(db,
      `SELECT function_id, status, COUNT(*)::int AS n FROM runs WHERE env = $1 GROUP BY function_id, status ORDER BY function_id, status`, Date.now() + 60_000, [env]);

    console.log('\nRuns by function and status');
    console.log(table([['function', 'status', 'runs'], ...byKind.map((r) => [r.function_id, r.status, r.n])]));
    console.log(`\nChaos: ${cluster.kills} services killed with SIGKILL and restarted, PostgreSQL ${pgRestart ? (pgDownMs !== undefined ? `restarted (back after ${pgDownMs} ms)` : 'restart not reached') : 'not restarted (--no-pg-restart)'}; ${drivers.approvals} approvals, ${drivers.cancels} cancels sent`);
    console.log(table([
      ['counter', 'value', 'must be 0'],
      ...Object.entries(counters).map(([k, v]) => [k, v, MUST_BE_ZERO.includes(k as keyof Counters) ? 'yes' : '']),
    ]));
    const failing = MUST_BE_ZERO.filter((k) => counters[k] !== 0);
    console.log(`sync call failures by code: ${JSON.stringify(Object.fromEntries(syncCallers.failuresByCode))}`);
    console.log(`audit rows counted lost by event type: ${JSON.stringify(audit.countedLostByEventType)}; missing: ${audit.missingCreated} run.created, ${audit.missingTerminal} terminal; rows of unanswered writes by fate: ${JSON.stringify(audit.unansweredByFate)}`);
    const path = writeResults(out, {
      ...partial,
      machine: await machineInfo(),
      counters,
      audit,
      mustBeZero: MUST_BE_ZERO,
      failing,
      kills: cluster.kills,
      restartsThatExitedWhileStarting: cluster.startFailures,
      killsWithoutReading: cluster.killsWithoutReading,
      postgresDownMs: pgDownMs ?? null,
      approvals: drivers.approvals,
      cancels: drivers.cancels,
      syncCallFailuresByCode: Object.fromEntries(syncCallers.failuresByCode),
      executions: Object.fromEntries(executions),
      runsByFunctionAndStatus: byKind,
      timeline: events,
    });
    written = true;
    console.log(`\nwrote ${path}`);
    if (chaosError) failed = `the chaos could not go on: ${chaosError}`;
    else if (failing.length) failed = `not 0: ${failing.map((k) => `${k}=${counters[k]}`).join(', ')} (database ${dbName} kept for inspection)`;
  } catch (err) {
    failed = `ended with an exception: ${String(err)} (database ${dbName} kept for inspection)`;
    if (!written) {
      try {
        const path = writeResults(out, {
          ...partial,
          error: err instanceof Error ? (err.stack ?? err.message) : String(err),
          machine: await machineInfo().catch(() => null),
          kills: cluster.kills,
          restartsThatExitedWhileStarting: cluster.startFailures,
          approvals: drivers?.approvals ?? null,
          cancels: drivers?.cancels ?? null,
          syncCallFailuresByCode: sync ? Object.fromEntries(sync.failuresByCode) : null,
          executions: Object.fromEntries(executions),
          timeline: events,
        });
        console.error(`chaos: wrote what it had to ${path}`);
      } catch (writeErr) {
        console.error(`chaos: could not write the results: ${String(writeErr)}`);
      }
    }
    throw err;
  } finally {
    stopChaos = true;
    await chaos?.catch(() => undefined);
    await drivers?.stop();
    await workers.stop();
    await cluster.stop();
    await db.end();
    if (!keep && !failed) await dropDatabase(dbName);
    await dropNamespaceStreams(new BusNamespace(clusterId), NATS_URL).catch(() => undefined);
  }
  if (failed) throw new Error(`chaos: FAILED, ${failed}`);
}

async function countAll(db: Pool, watch: OutcomeWatch, cluster: ChaosCluster, sync: SyncCallers, runs: number, leases: number, deadline: number): Promise<{ counters: Counters; audit: AuditDetail }> {
  const top = await query<{ id: string; function_id: string; status: string; input: string; output: string | null; recoveries: number }>(db, `SELECT id, function_id, status, input, output, recoveries FROM runs WHERE parent_run_id IS NULL`, deadline);
  const expectedOf = new Map(Object.values(KINDS).map((k) => [k.functionId as string, k.expected as string]));
  let wrongOutputs = 0;
  let syncAnswersWrong = 0;
  for (const r of top) {
    const n = (JSON.parse(r.input) as { n: number }).n;
    const output = r.output === null ? null : JSON.parse(r.output);
    if (r.function_id === KINDS.sync.functionId && ['completed', 'failed', 'cancelled'].includes(r.status)) {
      // The call's final answer is the run's committed outcome: same run, status and output.
      const answer = sync.answers.get(n);
      if (!answer || answer.runId !== r.id || answer.status !== r.status || (r.status === 'completed' && !isDeepStrictEqual(answer.output, output))) syncAnswersWrong += 1;
    }
    if (r.status !== 'completed') continue;
    const right =
      r.function_id === KINDS.invoke.functionId ? output?.doubled === 2 * n
        : r.function_id === KINDS.sleep.functionId ? output?.slept === true
          : r.function_id === KINDS.wait.functionId ? output?.approvedFor === `k${n}`
            : r.function_id === KINDS.sync.functionId ? output?.tripled === 3 * n
              : false;
    if (!right) wrongOutputs += 1;
  }
  const gateway = await cluster.countsOf(cluster.gateway);
  const forwarded = [...gateway].filter(([k]) => k.startsWith('forwards:')).reduce((sum, [, v]) => sum + v, 0);
  const seen: OutcomeWatchReport = await persist('outcome watch', () => watch.read(), deadline);
  const childrenNotWoken = Number((await query<{ n: number }>(db, `SELECT COUNT(*)::int AS n FROM runs WHERE parent_run_id IS NOT NULL AND status IN ${TERMINAL} AND wake_pending = 1`, deadline))[0].n);
  // Audit rows: wait until the audit-writer has caught up (the count stops moving for 3 s).
  let last = -1;
  for (let stableSince = Date.now(); Date.now() - stableSince < 3000 && Date.now() < deadline;) {
    const n = Number((await query<{ n: number }>(db, `SELECT COUNT(*)::int AS n FROM audit_events`, deadline))[0].n);
    if (n !== last) stableSince = Date.now();
    last = n;
    await sleep(500);
  }
  const missing = await query<{ created: number; ended: number }>(db, `
    SELECT
      (SELECT COUNT(*)::int FROM runs r WHERE NOT EXISTS (SELECT 1 FROM audit_events a WHERE a.run_id = r.id AND a.event_type = 'run.created')) AS created,
      (SELECT COUNT(*)::int FROM runs r WHERE r.status IN ${TERMINAL} AND NOT EXISTS (
         SELECT 1 FROM audit_events a WHERE a.run_id = r.id AND a.event_type = CASE WHEN r.status = 'cancelled' THEN 'run.cancelled' ELSE 'run.status_changed' END)) AS ended`, deadline);
  const audit = await cluster.auditCounts();
  const part = (prefix: string) => new Map([...audit].filter(([k]) => k.startsWith(prefix)).map(([k, n]) => [k.slice(prefix.length), n]));
  const lost = part('lost:');
  const unanswered = part('unanswered:');
  const sum = (types?: string[]) => [...lost].filter(([type]) => !types || types.includes(type)).reduce((n, [, v]) => n + v, 0);
  const counters: Counters = {
    runsStarted: top.length,
    runsCompleted: top.filter((r) => r.status === 'completed').length,
    runsFailed: top.filter((r) => r.status === 'failed').length,
    runsCancelled: top.filter((r) => r.status === 'cancelled').length,
    runsUnfinished: Math.max(0, runs - top.filter((r) => ['completed', 'failed', 'cancelled'].includes(r.status)).length),
    duplicateRuns: Math.max(0, top.length - runs),
    unexpectedOutcomes: top.filter((r) => expectedOf.get(r.function_id) !== r.status).length,
    wrongOutputs,
    outcomesReplaced: seen.outcomesReplaced,
    parentsWokenTwice: seen.parentsWokenTwice,
    waitsResolvedTwice: seen.waitsResolvedTwice,
    childrenNotWoken,
    leasesHeldAfterWait: leases,
    auditRowsCountedLost: sum(),
    auditRowsCountedLostChecked: sum(CHECKED_AUDIT_TYPES),
    auditRowsMissing: missing[0].created + missing[0].ended,
    auditRowsPendingAtKills: cluster.auditRowsPendingAtKills,
    auditRowsUnansweredButStored: unanswered.get('written') ?? 0,
    auditRowsUnansweredUnknown: unanswered.get('unknown') ?? 0,
    syncAnswersWrong,
    syncCallFailures: sync.callFailures,
    syncRunsWithFailedCalls: sync.runsWithFailedCalls.size,
    syncRunsRecovered: top.filter((r) => r.function_id === KINDS.sync.functionId && Number(r.recoveries) > 0).length,
    syncCallsUnended: sync.callsUnended,
    syncCallsAtGatewayKills: sync.inFlightAtGatewayKills,
    syncSegmentsClaimedByGateway: gateway.get('dispatched:push') ?? 0,
    syncTriggersForwarded: forwarded,
  };
  const countedLostByEventType = Object.fromEntries([...lost].filter(([, n]) => n > 0).sort());
  const unansweredByFate = Object.fromEntries([...unanswered].sort());
  return { counters, audit: { countedLostByEventType, unansweredByFate, missingCreated: missing[0].created, missingTerminal: missing[0].ended } };
}

runBenchmark(main);
