import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Client } from 'pg';
import { BusNamespace } from '@ironflow/bus';

/** Where the benchmarks find their services (defaults: the local PostgreSQL and NATS). */
export const DATABASE_URL = process.env.IRONFLOW_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const NATS_URL = process.env.IRONFLOW_BENCH_NATS_URL ?? 'nats://127.0.0.1:4222';

/** `--name 5`, `--name=5`; a missing flag gives `fallback`. Throws on a value that is not an integer ≥ `min`. */
export function intArg(name: string, fallback: number, min = 1): number {
  const raw = stringArg(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer of at least ${min}, got ${JSON.stringify(raw)}`);
  return value;
}

export function stringArg(name: string): string | undefined {
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i += 1) {
    if (args[i] === `--${name}`) return args[i + 1];
    if (args[i].startsWith(`--${name}=`)) return args[i].slice(name.length + 3);
  }
  return undefined;
}

export function flagArg(name: string): boolean {
  return process.argv.slice(2).includes(`--${name}`);
}

/** A schema name of its own, so a benchmark never touches another suite's tables. */
export function benchSchema(prefix: string): string {
  return `ironflow_bench_${prefix}_${randomBytes(4).toString('hex')}`;
}

export async function dropSchema(schema: string): Promise<void> {
  const client = new Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** A client whose search_path is `schema` (bulk SQL outside the engine). */
export async function schemaClient(schema: string): Promise<Client> {
  const client = new Client({ connectionString: DATABASE_URL, options: `-c search_path="${schema}"` });
  await client.connect();
  return client;
}

export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

/** Nearest-rank percentiles of `samples` (ms), rounded to 0.01 ms. */
export function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  const r = (v: number) => Math.round(v * 100) / 100;
  const mean = sorted.reduce((s, v) => s + v, 0) / Math.max(1, sorted.length);
  return { n: sorted.length, p50: r(rank(50)), p90: r(rank(90)), p99: r(rank(99)), mean: r(mean), min: r(sorted[0] ?? 0), max: r(sorted[sorted.length - 1] ?? 0) };
}

/** A plain-text table; the first row is the header. */
export function table(rows: (string | number)[][]): string {
  const cells = rows.map((row) => row.map(String));
  const widths = cells[0].map((_c, i) => Math.max(...cells.map((row) => (row[i] ?? '').length)));
  const line = (row: string[]) => row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

/** `bench/results/<name>.json` in the source tree (the compiled file runs from dist/bench). */
export function writeResults(name: string, data: unknown): string {
  const root = findRepoRoot();
  const path = join(root, 'bench', 'results', `${name}.json`);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(data, null, 2)}\n`);
  return path;
}

function findRepoRoot(): string {
  // dist/bench/lib/common.js → repo root is three levels up; fall back to the working directory.
  const fromDist = resolve(__dirname, '..', '..', '..');
  try {
    require.resolve(join(fromDist, 'package.json'));
    return fromDist;
  } catch {
    return process.cwd();
  }
}

export async function machineInfo(): Promise<Record<string, unknown>> {
  let postgres = 'unknown';
  try {
    const client = new Client({ connectionString: DATABASE_URL });
    await client.connect();
    postgres = String((await client.query('SHOW server_version')).rows[0].server_version);
    await client.end();
  } catch {
    // reported as unknown
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    postgres,
    databaseUrl: DATABASE_URL.replace(/\/\/([^:@/]+):[^@]*@/, '//$1:***@'),
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Removes what a benchmark left in the deployment's JetStream streams under its own scope (STEPS keeps
 * hints with no consumer, RESULTS and PUBSUB keep frames and run events). Best effort.
 */
export async function purgeScope(natsUrl: string, project: string, env: string, namespace = new BusNamespace()): Promise<void> {
  const { connect } = await import('nats');
  const nc = await connect({ servers: natsUrl.split(','), name: 'ironflow-bench-cleanup' });
  try {
    const jsm = await nc.jetstreamManager();
    for (const [stream, filter] of [['STEPS', `ironflow.${project}.${env}.>`], ['RESULTS', `ironflow.${project}.${env}.>`], ['EVENTS', `ironflow.${project}.${env}.>`], ['PUBSUB', `public.${env}.>`]]) {
      await jsm.streams.purge(namespace.stream(stream), { filter: namespace.subject(filter) }).catch(() => undefined);
    }
  } finally {
    await nc.close();
  }
}

/** Runs a benchmark's `main`: exit 0 when it resolves, print the error and exit 1 when it throws. */
export function runBenchmark(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
