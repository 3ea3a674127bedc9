/**
 * `bench/compare`: Ironflow (the cluster on PostgreSQL + NATS, a single node on PostgreSQL, and
 * `ironflow dev` on SQLite) and DBOS Transact side by side on the same workloads, interleaved, a
 * fresh deployment and database per system and round. See bench/README.md "compare".
 *
 *   node dist/bench/compare/main.js [--quick] [--rounds 3] [--seconds 10] [--sequential 300] [--only cluster,single,dev,dbos]
 */
import { loadavg } from 'node:os';
import { Client } from 'pg';
import { DATABASE_URL, flagArg, intArg, machineInfo, runBenchmark, sleep, stringArg, summarize, table, writeResults } from '../lib/common';
import { progress } from '../lib/progress';
import { PhaseResult } from './load';
import { cpuDelta, cpuSnapshot } from './proc-stat';
import { START, System, SystemName, adminQuery } from './systems';
import { WriteTransactionCounter } from './write-transactions';
import { STATEMENT_FLUSH_MS, StatementCounts, readStatementCounts, statementDelta } from './pg-statements';

/** PostgreSQL flushes a backend's counters at most every 10 s while it idles (PGSTAT_IDLE_INTERVAL). */
const STATS_SETTLE_MS = 11_000;
const BASELINE_MS = 10_000;
/** The sequential phase runs in this many slices for the write transaction count (the lowest slice). */
const WRITE_SLICES = 5;
/** After each slice, how long its calls' follow-ups (audit rows) have to land before the count is read. */
const WRITE_SETTLE_MS = 500;

interface RoundResult {
  system: SystemName;
  round: number;
  oneStepPerSec: number;
  parentChildPerSec: number;
  syncP50Ms: number;
  syncP99Ms: number;
  /** xact_commit on the system's database per sequential one-step run, net of its idle rate; null on SQLite. */
  txPerRun: number | null;
  /**
   * Write transactions (transaction ids taken, cluster-wide) per sequential one-step run, net of
   * the idle rate: the lowest of the phase's slices; null on SQLite.
   */
  writeTxPerRun: number | null;
  /** Write transactions per sequential run that left a row version in the system's database (exact, a lower bound); null on SQLite. */
  rowWriteTxPerRun: number | null;
  /** Each slice's figure and the idle rate's one-second windows (ids/s), to judge the noise. */
  writeTx?: { slices: number[]; idleSlicesPerSec: number[] };
  /** Rows inserted, updated or deleted on that database per sequential run, net of the idle rate; null on SQLite. */
  rowsPerRun: number | null;
  /** The same by table (`pg_stat_user_tables`): inserted, updated and deleted rows per sequential run, the tables of at least 0.01 a run. */
  rowsPerRunByTable?: Record<string, { ins: number; upd: number; del: number }>;
  /** Statements sent to PostgreSQL per sequential run by process role (`total` summed), net of the idle rate; null without counters. */
  statementsPerRun: Record<string, number> | null;
  /** The same by statement text (first 120 characters) for each role, the texts of at least 0.05 a run. */
  statementTextsPerRun?: Record<string, Record<string, number>>;
  idleTxPerSec: number | null;
  /**
   * CPU ms per sequential one-step run by process role (`postgres`: the client backends), over the
   * sequential calls (and their follow-ups' 500 ms per slice), net of the idle rate measured before
   * them: CPU time is much less sensitive to other load on the machine than the
   * throughput phase's per-run figure, which needs runs to end in its window.
   */
  sequentialCpuMsPerRun: Record<string, number> | null;
  /** CPU ms per one-step run (64 in flight) by process role, `postgres` = the database's backends. */
  cpuMsPerRun: Record<string, number>;
  /** Statements sent to PostgreSQL per one-step run at 64 in flight by role (`total` summed; gross, idle rate not taken off); null without counters. */
  inflightStatementsPerRun: Record<string, number> | null;
  /** The same by statement text for each role, the texts of at least 0.05 a run. */
  inflightStatementTextsPerRun?: Record<string, Record<string, number>>;
  /**
   * The api-gateway's trigger forwards by result per one-step run (64 in flight): all but
   * `answered` were triggered by the gateway itself (`ironflow_trigger_forwards_total`); cluster only.
   */
  forwardsPerRun: Record<string, number> | null;
  failed: number;
  firstError?: string;
  loadAvgBefore: number;
}

const r2 = (v: number) => Math.round(v * 100) / 100;

function readAllStatements(system: System): Record<string, StatementCounts> {
  return Object.fromEntries(Object.entries(system.statementFiles()).map(([role, file]) => [role, readStatementCounts(file)]));
}

/**
 * Statements per run by role between the readings `s1` and `s2` (`runs` runs), less the idle rate
 * measured between `s0` and `s1` (over `idleMs`, scaled to `busyMs`).
 */
function statementsPerRun(
  s0: Record<string, StatementCounts>,
  s1: Record<string, StatementCounts>,
  s2: Record<string, StatementCounts>,
  idleMs: number,
  busyMs: number,
  runs: number,
): { perRun: Record<string, number>; texts: Record<string, Record<string, number>> } | null {
  const roles = Object.keys(s2);
  if (roles.length === 0) return null;
  const perRun: Record<string, number> = {};
  const texts: Record<string, Record<string, number>> = {};
  let total = 0;
  for (const role of roles) {
    const idle = statementDelta(s0[role], s1[role]);
    const busy = statementDelta(s1[role], s2[role]);
    const scale = busyMs / Math.max(1, idleMs);
    perRun[role] = r2((busy.total - idle.total * scale) / runs);
    total += perRun[role];
    const byText: [string, number][] = Object.entries(busy.byText).map(([text, n]) => [text, r2((n - (idle.byText[text] ?? 0) * scale) / runs)]);
    texts[role] = Object.fromEntries(byText.filter(([, n]) => n >= 0.05).sort((a, b) => b[1] - a[1]));
  }
  perRun.total = r2(total);
  return { perRun, texts };
}

/** Per run and by role: `busy` less `idle` scaled from `idleMs` to `busyMs`, over `runs` runs, with `total`. */
function netPerRun(idle: Record<string, number>, busy: Record<string, number>, idleMs: number, busyMs: number, runs: number): Record<string, number> {
  const out: Record<string, number> = {};
  let total = 0;
  for (const [role, ms] of Object.entries(busy)) {
    out[role] = r2((ms - (idle[role] ?? 0) * (busyMs / Math.max(1, idleMs))) / runs);
    total += out[role];
  }
  out.total = r2(total);
  return out;
}

/** The database's committed transactions (read-only ones included) and rows written, from pg_stat_database. */
async function dbCounters(database: string): Promise<{ tx: number; rows: number }> {
  const rows = await adminQuery<{ tx: string; rows: string }>(
    'SELECT xact_commit AS tx, tup_inserted + tup_updated + tup_deleted AS rows FROM pg_stat_database WHERE datname = $1',
    [database],
  );
  return { tx: Number(rows[0]?.tx ?? 0), rows: Number(rows[0]?.rows ?? 0) };
}

type TableCounts = Record<string, { ins: number; upd: number; del: number }>;

/** Rows inserted, updated and deleted per table of `database` (`pg_stat_user_tables`, schema-qualified). */
async function tableCounters(database: string): Promise<TableCounts> {
  const url = new URL(DATABASE_URL);
  url.pathname = `/${database}`;
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const rows = await client.query<{ t: string; ins: string; upd: string; del: string }>(
      `SELECT schemaname || '.' || relname AS t, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del FROM pg_stat_user_tables`,
    );
    return Object.fromEntries(rows.rows.map((r) => [r.t, { ins: Number(r.ins), upd: Number(r.upd), del: Number(r.del) }]));
  } finally {
    await client.end();
  }
}

/** Per run and by table: the rows between `s1` and `s2` less the idle rate between `s0` and `s1`, the tables of at least 0.01 a run. */
function tableRowsPerRun(s0: TableCounts, s1: TableCounts, s2: TableCounts, idleMs: number, busyMs: number, runs: number): TableCounts {
  const scale = busyMs / Math.max(1, idleMs);
  const zero = { ins: 0, upd: 0, del: 0 };
  const out: TableCounts = {};
  for (const [t, c2] of Object.entries(s2)) {
    const c0 = s0[t] ?? zero;
    const c1 = s1[t] ?? zero;
    const per = (k: 'ins' | 'upd' | 'del') => r2((c2[k] - c1[k] - (c1[k] - c0[k]) * scale) / runs);
    const row = { ins: per('ins'), upd: per('upd'), del: per('del') };
    if (Math.abs(row.ins) + Math.abs(row.upd) + Math.abs(row.del) >= 0.01) out[t] = row;
  }
  return out;
}

/** The system's processes by role, `postgres` its database's backends (with `clientsOnly`, the client backends: no autovacuum). */
async function processGroups(system: System, clientsOnly = false): Promise<Record<string, number[]>> {
  const groups = system.processes();
  if (system.database) {
    const rows = await adminQuery<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = $1${clientsOnly ? ` AND backend_type = 'client backend'` : ''}`,
      [system.database],
    );
    groups.postgres = rows.map((r) => r.pid);
  }
  return groups;
}

async function measure(system: System, round: number, opts: Options, tick: (label: string) => void): Promise<RoundResult> {
  const loadAvgBefore = r2(loadavg()[0]);
  let failed = 0;
  let firstError: string | undefined;
  const check = (r: PhaseResult) => {
    failed += r.failed;
    firstError ??= r.firstError;
    return r;
  };
  // Warm-up: connections, caches, JIT.
  check(await system.phase({ kind: 'closed', workload: 'one-step', inflight: 8, durationMs: opts.warmupMs }));
  check(await system.phase({ kind: 'closed', workload: 'parent-child', inflight: 4, durationMs: opts.warmupMs }));
  tick(`${system.name} warm`);

  // Sequential TriggerSync, with the transactions it commits (net of the idle rate around it).
  let txPerRun: number | null = null;
  let writeTxPerRun: number | null = null;
  let rowWriteTxPerRun: number | null = null;
  let writeTx: RoundResult['writeTx'];
  let rowsPerRun: number | null = null;
  let rowsPerRunByTable: TableCounts | undefined;
  let statements: ReturnType<typeof statementsPerRun> = null;
  let sequentialCpuMsPerRun: Record<string, number> | null = null;
  let idleTxPerSec: number | null = null;
  const seq: PhaseResult = { completed: 0, failed: 0, elapsedMs: 0, latenciesMs: [] };
  const sequential = async (n: number) => {
    const r = check(await system.phase({ kind: 'sequential', workload: 'one-step', n }));
    seq.completed += r.completed;
    seq.failed += r.failed;
    seq.elapsedMs += r.elapsedMs;
    seq.latenciesMs.push(...r.latenciesMs);
    return r.completed;
  };
  if (system.database) {
    const counter = await WriteTransactionCounter.open();
    try {
      await sleep(STATS_SETTLE_MS);
      const s0 = await dbCounters(system.database);
      const tables0 = await tableCounters(system.database);
      const q0 = readAllStatements(system);
      const seqGroups = await processGroups(system, true);
      const c0 = cpuSnapshot(seqGroups);
      const t0 = Date.now();
      const idle = await counter.idleRate(BASELINE_MS / 1000, 1000);
      const s1 = await dbCounters(system.database);
      const tables1 = await tableCounters(system.database);
      await sleep(2 * STATEMENT_FLUSH_MS);
      const q1 = readAllStatements(system);
      const c1 = cpuSnapshot(seqGroups);
      const t1 = Date.now();
      const idleTx = (s1.tx - s0.tx) / (t1 - t0);
      const idleRows = (s1.rows - s0.rows) / (t1 - t0);
      const writes = await counter.perCall(opts.sequential, WRITE_SLICES, WRITE_SETTLE_MS, idle.perMs, sequential);
      const c2 = cpuSnapshot(seqGroups);
      const t2Cpu = Date.now();
      await sleep(STATS_SETTLE_MS);
      const s2 = await dbCounters(system.database);
      const tables2 = await tableCounters(system.database);
      const q2 = readAllStatements(system);
      const t2 = Date.now();
      const runs = Math.max(1, seq.completed);
      sequentialCpuMsPerRun = netPerRun(cpuDelta(c0, c1), cpuDelta(c1, c2), t1 - t0, t2Cpu - t1, runs);
      statements = statementsPerRun(q0, q1, q2, t1 - t0, t2 - t1, runs);
      txPerRun = r2((s2.tx - s1.tx - idleTx * (t2 - t1)) / runs);
      rowsPerRun = r2((s2.rows - s1.rows - idleRows * (t2 - t1)) / runs);
      rowsPerRunByTable = tableRowsPerRun(tables0, tables1, tables2, t1 - t0, t2 - t1, runs);
      idleTxPerSec = r2(idleTx * 1000);
      writeTxPerRun = writes.perCall;
      rowWriteTxPerRun = r2((await counter.leftRowVersions(system.database, writes.from, writes.to)) / runs);
      writeTx = { slices: writes.slices, idleSlicesPerSec: idle.slicesPerSec };
    } finally {
      await counter.close();
    }
  } else {
    await sequential(opts.sequential);
  }
  const sync = summarize(seq.latenciesMs);
  tick(`${system.name} sequential`);

  const groups = await processGroups(system);
  const f0 = await system.triggerForwards?.();
  const c0 = cpuSnapshot(groups);
  const i0 = readAllStatements(system);
  const one = check(await system.phase({ kind: 'closed', workload: 'one-step', inflight: 64, durationMs: opts.durationMs }));
  const cpu = cpuDelta(c0, cpuSnapshot({ ...groups, ...(await processGroups(system)) }));
  await sleep(2 * STATEMENT_FLUSH_MS);
  const inflight = statementsPerRun(i0, i0, readAllStatements(system), 1, 1, Math.max(1, one.completed));
  const f1 = await system.triggerForwards?.();
  tick(`${system.name} one-step`);
  const pc = check(await system.phase({ kind: 'closed', workload: 'parent-child', inflight: 32, durationMs: opts.durationMs }));
  tick(`${system.name} parent-child`);

  // Per run only when runs ended in the window (none: no figure, not the phase's whole CPU).
  const cpuMsPerRun: Record<string, number> = {};
  if (one.completed > 0) {
    let total = 0;
    for (const [role, ms] of Object.entries(cpu)) {
      cpuMsPerRun[role] = r2(ms / one.completed);
      total += ms;
    }
    cpuMsPerRun.total = r2(total / one.completed);
  }
  let forwardsPerRun: Record<string, number> | null = null;
  if (f0 && f1 && Object.keys(f1).length > 0 && one.completed > 0) {
    forwardsPerRun = Object.fromEntries(Object.entries(f1).map(([result, n]) => [result, r2((n - (f0[result] ?? 0)) / one.completed)]));
  }
  return {
    system: system.name,
    round,
    oneStepPerSec: r2((one.completed * 1000) / one.elapsedMs),
    parentChildPerSec: r2((pc.completed * 1000) / pc.elapsedMs),
    syncP50Ms: sync.p50,
    syncP99Ms: sync.p99,
    txPerRun,
    writeTxPerRun,
    rowWriteTxPerRun,
    writeTx,
    rowsPerRun,
    rowsPerRunByTable,
    statementsPerRun: statements?.perRun ?? null,
    sequentialCpuMsPerRun,
    statementTextsPerRun: statements?.texts,
    idleTxPerSec,
    cpuMsPerRun,
    inflightStatementsPerRun: inflight?.perRun ?? null,
    inflightStatementTextsPerRun: inflight?.texts,
    forwardsPerRun,
    failed,
    firstError,
    loadAvgBefore,
  };
}

interface Options {
  rounds: number;
  durationMs: number;
  warmupMs: number;
  sequential: number;
  systems: SystemName[];
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main(): Promise<void> {
  const quick = flagArg('quick');
  const opts: Options = {
    rounds: quick ? 1 : intArg('rounds', 3),
    durationMs: (quick ? 3 : intArg('seconds', 10)) * 1000,
    warmupMs: quick ? 1000 : 2000,
    sequential: quick ? 50 : intArg('sequential', 300),
    systems: (stringArg('only') ?? 'cluster,single,dev,dbos').split(',').map((s) => s.trim()) as SystemName[],
  };
  for (const s of opts.systems) if (!(s in START)) throw new Error(`--only: unknown system ${JSON.stringify(s)} (cluster, single, dev, dbos)`);

  const steps = opts.rounds * opts.systems.length * 5;
  const bar = progress('compare', steps);
  let done = 0;
  const tick = () => bar.update(++done);
  const results: RoundResult[] = [];
  const loadStart = loadavg().map(r2);
  for (let round = 1; round <= opts.rounds; round += 1) {
    // Interleaved: each round starts with the next system, so none always runs first.
    const order = opts.systems.map((_s, i) => opts.systems[(i + round - 1) % opts.systems.length]);
    for (const name of order) {
      const system = await START[name]();
      tick();
      try {
        results.push(await measure(system, round, opts, tick));
      } finally {
        await system.stop();
      }
    }
  }
  bar.stop();
  const loadEnd = loadavg().map(r2);

  const med = (name: SystemName, pick: (r: RoundResult) => number | null) => {
    const values = results.filter((r) => r.system === name).map(pick).filter((v): v is number => v !== null);
    return values.length ? r2(median(values)) : null;
  };
  const medians: Record<string, Record<string, number | null | Record<string, number | null>>> = {};
  for (const name of opts.systems) {
    const roles = new Set(results.filter((r) => r.system === name).flatMap((r) => Object.keys(r.cpuMsPerRun)));
    medians[name] = {
      oneStepPerSec: med(name, (r) => r.oneStepPerSec),
      parentChildPerSec: med(name, (r) => r.parentChildPerSec),
      syncP50Ms: med(name, (r) => r.syncP50Ms),
      syncP99Ms: med(name, (r) => r.syncP99Ms),
      txPerRun: med(name, (r) => r.txPerRun),
      writeTxPerRun: med(name, (r) => r.writeTxPerRun),
      rowWriteTxPerRun: med(name, (r) => r.rowWriteTxPerRun),
      rowsPerRun: med(name, (r) => r.rowsPerRun),
      statementsPerRun: Object.fromEntries(
        [...new Set(results.filter((r) => r.system === name).flatMap((r) => Object.keys(r.statementsPerRun ?? {})))].map((role) => [
          role,
          med(name, (r) => r.statementsPerRun?.[role] ?? null),
        ]),
      ),
      inflightStatementsPerRun: Object.fromEntries(
        [...new Set(results.filter((r) => r.system === name).flatMap((r) => Object.keys(r.inflightStatementsPerRun ?? {})))].map((role) => [
          role,
          med(name, (r) => r.inflightStatementsPerRun?.[role] ?? null),
        ]),
      ),
      sequentialCpuMsPerRun: Object.fromEntries(
        [...new Set(results.filter((r) => r.system === name).flatMap((r) => Object.keys(r.sequentialCpuMsPerRun ?? {})))].map((role) => [
          role,
          med(name, (r) => r.sequentialCpuMsPerRun?.[role] ?? null),
        ]),
      ),
      cpuMsPerRun: Object.fromEntries([...roles].map((role) => [role, med(name, (r) => r.cpuMsPerRun[role] ?? null)])),
      forwardsPerRun: Object.fromEntries(
        [...new Set(results.filter((r) => r.system === name).flatMap((r) => Object.keys(r.forwardsPerRun ?? {})))].map((result) => [
          result,
          med(name, (r) => r.forwardsPerRun?.[result] ?? null),
        ]),
      ),
    };
  }
  const ratio = (name: SystemName, key: string) => {
    const a = medians[name]?.[key] as number | null;
    const b = medians.dbos?.[key] as number | null;
    return a !== null && b !== null && a !== undefined && b !== undefined && b !== 0 ? r2(a / b) : null;
  };
  const ratios: Record<string, Record<string, number | null>> = {};
  for (const name of opts.systems.filter((s) => s !== 'dbos')) {
    ratios[name] = Object.fromEntries(['oneStepPerSec', 'parentChildPerSec', 'syncP50Ms', 'syncP99Ms', 'txPerRun', 'writeTxPerRun', 'rowWriteTxPerRun', 'rowsPerRun'].map((k) => [k, ratio(name, k)]));
  }

  const fmt = (v: unknown) => (v === null || v === undefined ? '—' : String(v));
  const rows: (string | number)[][] = [['median of ' + opts.rounds + ' round(s)', ...opts.systems, ...Object.keys(ratios).map((n) => `${n}/dbos`)]];
  const line = (label: string, key: string) => rows.push([label, ...opts.systems.map((s) => fmt(medians[s][key])), ...Object.keys(ratios).map((n) => fmt(ratios[n][key]))]);
  line('one-step runs/s (64 in flight)', 'oneStepPerSec');
  line('parent+child /s (32 in flight)', 'parentChildPerSec');
  line('sequential TriggerSync p50 ms', 'syncP50Ms');
  line('sequential TriggerSync p99 ms', 'syncP99Ms');
  line('transactions per run (xact_commit)', 'txPerRun');
  line('write transactions per run (xids)', 'writeTxPerRun');
  line('  of them left a row (xmin)', 'rowWriteTxPerRun');
  line('rows written per run', 'rowsPerRun');
  const failures = results.filter((r) => r.failed > 0);
  console.log(table(rows));
  for (const s of opts.systems) {
    const cpu = medians[s].cpuMsPerRun as Record<string, number | null>;
    console.log(`CPU ms per one-step run, ${s}: ${Object.entries(cpu).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')}`);
  }
  for (const s of opts.systems) {
    const forwards = medians[s].forwardsPerRun as Record<string, number | null>;
    if (Object.keys(forwards).length === 0) continue;
    console.log(`api-gateway trigger forwards per one-step run, ${s}: ${Object.entries(forwards).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')}`);
  }
  for (const s of opts.systems) {
    const cpu = medians[s].sequentialCpuMsPerRun as Record<string, number | null>;
    if (Object.keys(cpu).length === 0) continue;
    console.log(`CPU ms per sequential one-step run, ${s}: ${Object.entries(cpu).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')}`);
  }
  for (const s of opts.systems) {
    const statements = medians[s].statementsPerRun as Record<string, number | null>;
    if (Object.keys(statements).length === 0) continue;
    console.log(`statements per sequential run, ${s}: ${Object.entries(statements).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')}`);
  }
  for (const s of opts.systems) {
    const statements = medians[s].inflightStatementsPerRun as Record<string, number | null>;
    if (Object.keys(statements).length === 0) continue;
    console.log(`statements per one-step run at 64 in flight, ${s}: ${Object.entries(statements).map(([k, v]) => `${k} ${fmt(v)}`).join(', ')}`);
  }
  if (flagArg('statements')) {
    for (const r of results) {
      if (!r.rowsPerRunByTable) continue;
      console.log(`round ${r.round} ${r.system}, rows written per sequential run by table (inserted/updated/deleted):`);
      for (const [t, c] of Object.entries(r.rowsPerRunByTable)) console.log(`  ${t}: ${c.ins}/${c.upd}/${c.del}`);
    }
    for (const r of results) {
      for (const [role, texts] of Object.entries(r.statementTextsPerRun ?? {})) {
        console.log(`round ${r.round} ${r.system} ${role}, statements per sequential run by text:`);
        for (const [text, n] of Object.entries(texts)) console.log(`  ${String(n).padStart(6)}  ${text}`);
      }
      for (const [role, texts] of Object.entries(r.inflightStatementTextsPerRun ?? {})) {
        console.log(`round ${r.round} ${r.system} ${role}, statements per one-step run at 64 in flight by text:`);
        for (const [text, n] of Object.entries(texts)) console.log(`  ${String(n).padStart(6)}  ${text}`);
      }
    }
  }
  console.log(`load average: ${loadStart.join(' ')} at start, ${loadEnd.join(' ')} at end`);
  for (const f of failures) console.log(`round ${f.round} ${f.system}: ${f.failed} failed call(s), first: ${f.firstError}`);

  const path = writeResults('compare', {
    at: new Date().toISOString(),
    machine: await machineInfo(),
    options: opts,
    loadAverage: { start: loadStart, end: loadEnd },
    medians,
    ratiosToDbos: ratios,
    rounds: results,
  });
  console.log(`results: ${path}`);
}

runBenchmark(main);
