/**
 * The cost of the API key check at the edge (issue 9, item 7): Connect JSON `Health` calls over
 * real HTTP/1.1 (keep-alive) to a server running every service, sequential, after a warm-up:
 *
 * - `open`: no key exists (the server is open; the check reads nothing);
 * - `keyed`: a key exists and the caller sends it (lookup cached in the process, SHA-256 and a
 *   constant-time compare per call);
 * - `keyed-uncached`: the same key against another server on the same database with
 *   `apiKeyCacheMs` 0 (one store read per call: the worst case, never the default);
 * - `refused`: no key while keys exist (401 UNAUTHENTICATED).
 *
 * `node dist/bench/api-key-check.js [--calls 4000] [--warmup 500] [--rounds 20]`; PostgreSQL from
 * IRONFLOW_BENCH_DATABASE_URL (databases of their own, dropped at the end). Modes run in
 * interleaved rounds, so the machine's busy moments weigh on each alike. Prints a table and
 * writes bench/results/api-key-check.json.
 */
import { createProcessLogger } from '@ironflow/observability';
import { randomBytes } from 'node:crypto';
import { IronflowSettings, RunningServer, SERVICES, loadSettings, startServer } from '@ironflow/services';
import { scratchDatabase } from '@ironflow/testing';
import { DATABASE_URL, Summary, intArg, machineInfo, nowMs, runBenchmark, summarize, table, writeResults } from './lib/common';
import { progress } from './lib/progress';

interface ModeResult {
  mode: string;
  what: string;
  status: number;
  latencyMs: Summary;
  callsPerSecond: number;
}

interface Mode {
  mode: string;
  what: string;
  url: string;
  headers: Record<string, string>;
  samples: number[];
  elapsedMs: number;
  status: number;
}

async function health(url: string, headers: Record<string, string>): Promise<number> {
  const res = await fetch(`${url}/ironflow.v1.IronflowService/Health`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
  await res.arrayBuffer();
  return res.status;
}

async function main(): Promise<void> {
  const calls = intArg('calls', 4000);
  const warmup = intArg('warmup', 500, 0);
  const rounds = intArg('rounds', 20);
  process.env.IRONFLOW_TEST_DATABASE_URL ??= DATABASE_URL;
  const openDb = await scratchDatabase('postgres', 'ironflow_bench_apikey');
  const keyedDb = await scratchDatabase('postgres', 'ironflow_bench_apikey');
  const settings = (databaseUrl: string, extra: Partial<IronflowSettings> = {}) =>
    loadSettings({}, { databaseUrl, port: 0, host: '127.0.0.1', poolSize: 4, adminKey: randomBytes(24).toString('hex'), ...extra });
  const servers: RunningServer[] = [];
  const quiet = { logger: createProcessLogger({ service: 'bench', level: 'error' }) };
  const startedAt = new Date().toISOString();
  let modes: Mode[] = [];
  try {
    const open = await startServer(settings(openDb.url), SERVICES, quiet);
    servers.push(open);
    const keyed = await startServer(settings(keyedDb.url), SERVICES, quiet);
    servers.push(keyed);
    const uncached = await startServer(settings(keyedDb.url, { apiKeyCacheMs: 0 }), SERVICES, quiet);
    servers.push(uncached);
    const { key } = await keyed.runtime.engine.apiKeys.create({ name: 'bench' });
    const bearer = { authorization: `Bearer ${key}` };
    const mode = (name: string, what: string, url: string, headers: Record<string, string>): Mode => ({ mode: name, what, url, headers, samples: [], elapsedMs: 0, status: 0 });
    modes = [
      mode('open', 'no key exists: the server is open', open.url, {}),
      mode('keyed', 'the key, lookup cached in the process (default 5 s)', keyed.url, bearer),
      mode('keyed-uncached', 'the key, IRONFLOW_API_KEY_CACHE_MS=0: one store read per call', uncached.url, bearer),
      mode('refused', 'no key while keys exist: 401 UNAUTHENTICATED', keyed.url, {}),
    ];
    process.stderr.write(`API key check: ${calls} sequential Connect JSON Health calls per mode (+${warmup} warm-up), modes interleaved in ${rounds} rounds\n`);
    for (const m of modes) for (let i = 0; i < warmup; i += 1) await health(m.url, m.headers);
    // Interleaved rounds, so a busy moment of the machine weighs on every mode alike.
    const perRound = Math.ceil(calls / rounds);
    const bar = progress('calls', perRound * rounds * modes.length);
    let done = 0;
    for (let round = 0; round < rounds; round += 1) {
      for (const m of modes) {
        const started = nowMs();
        for (let i = 0; i < perRound; i += 1) {
          const t = nowMs();
          m.status = await health(m.url, m.headers);
          m.samples.push(nowMs() - t);
          bar.update(++done);
        }
        m.elapsedMs += nowMs() - started;
      }
    }
    bar.stop();
  } finally {
    for (const s of servers) await s.close();
    await openDb.drop();
    await keyedDb.drop();
  }
  const results: ModeResult[] = modes.map((m) => ({ mode: m.mode, what: m.what, status: m.status, latencyMs: summarize(m.samples), callsPerSecond: Math.round((m.samples.length / m.elapsedMs) * 1000) }));
  const rows: (string | number)[][] = [['mode', 'status', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms', 'calls/s']];
  for (const r of results) rows.push([r.mode, r.status, r.latencyMs.n, r.latencyMs.p50, r.latencyMs.p90, r.latencyMs.p99, r.latencyMs.mean, r.callsPerSecond]);
  console.log(`\nAPI key check at the edge (sequential Connect JSON Health calls, HTTP/1.1 keep-alive, PostgreSQL, modes interleaved)\n`);
  console.log(table(rows));
  for (const r of results) console.log(`${r.mode}: ${r.what}`);
  const path = writeResults('api-key-check', { benchmark: 'api-key-check', startedAt, machine: await machineInfo(), parameters: { calls, warmup, rounds }, results });
  console.log(`\nwrote ${path}`);
}

runBenchmark(main);
