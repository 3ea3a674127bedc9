import { ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { createClient } from '@ironflow/sdk';
import { BusNamespace } from '@ironflow/bus';
import { ServiceApp, ServiceProcess, devApp, freePort, nodeArgsFor } from '@ironflow/testing';
import { DATABASE_URL, NATS_URL } from '../lib/common';
import { PhaseRequest, PhaseResult, Workload, runPhase } from './load';

export type SystemName = 'cluster' | 'single' | 'dev' | 'dbos';

/** One system under test, started fresh for a round and stopped after it. */
export interface System {
  readonly name: SystemName;
  /** The PostgreSQL database whose transactions are the system's (none for `dev`). */
  readonly database?: string;
  /** The system's processes by role (PostgreSQL backends are added by the caller). */
  processes(): Record<string, number[]>;
  /** The `pg` statement counter's file of each process by role (`pg-statements.ts`); none for DBOS and SQLite. */
  statementFiles(): Record<string, string>;
  phase(request: PhaseRequest, onCompleted?: (n: number) => void): Promise<PhaseResult>;
  /**
   * The api-gateway's `ironflow_trigger_forwards_total` by result (answered, busy, no_responders,
   * failed), read from its `/metrics`; only the cluster has it.
   */
  triggerForwards?(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}


/** Runs `sql` on the admin database (`IRONFLOW_BENCH_DATABASE_URL`). */
export async function adminQuery<T extends Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new Client({ connectionString: DATABASE_URL });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

async function createDatabase(prefix: string): Promise<{ name: string; url: string }> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`CREATE DATABASE "${name}"`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return { name, url: url.toString() };
}

const dropDatabase = (name: string) => adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).then(() => undefined);

/** How long a service may take to answer `/ready` (ms). */
const READY_TIMEOUT_MS = 90_000;
/** How long a service may drain after SIGTERM before it is killed (ms). */
const STOP_KILL_AFTER_MS = 15_000;

/**
 * A service of the bench: logs at warn, and only the database and NATS given here (none inherited).
 * With `statements`, the process preloads the `pg` statement counter writing to that file.
 */
function benchService(app: ConstructorParameters<typeof ServiceProcess>[0], port: number, env: Record<string, string>, statements?: string): ServiceProcess {
  const counter = statements
    ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${join(__dirname, 'pg-statements.js')}`.trim(), IRONFLOW_BENCH_PG_STATEMENTS: statements }
    : {};
  return new ServiceProcess(app, port, { IRONFLOW_DATABASE_URL: undefined, NATS_URL: undefined, IRONFLOW_NATS_URL: undefined, IRONFLOW_LOG_LEVEL: 'warn', ...env, ...counter });
}

/** A fresh directory for a system's statement counter files. */
function statementDir(): string {
  return mkdtempSync(join(tmpdir(), 'ironflow-bench-statements-'));
}

/** Signals `child` and waits for its exit (SIGKILL after 15 s). */
async function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

/** Forks `dist/bench/compare/<script>.js` with IPC (Node options from `IRONFLOW_NODE_ARGS_<SCRIPT>`, see `nodeArgsFor`) and waits for its `{ready: true}`. */
async function forkReady(script: string, args: string[]): Promise<ChildProcess> {
  const child = fork(join(__dirname, `${script}.js`), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...process.execArgv, ...nodeArgsFor(script)] });
  await new Promise<void>((res, rej) => {
    const onMessage = (m: { ready?: boolean }) => {
      if (m?.ready) {
        child.off('exit', onExit);
        child.off('message', onMessage);
        res();
      }
    };
    const onExit = (code: number | null) => rej(new Error(`${script} exited with ${code} before it was ready`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
  return child;
}

/** The TriggerSync call of each workload through the SDK client. */
function ironflowCaller(serverUrl: string, environment: string): (workload: Workload, i: number) => Promise<unknown> {
  const client = createClient({ serverUrl, environment, timeoutMs: 60_000 });
  return (workload, i) => client.emitSync(workload === 'one-step' ? 'bench.one' : 'bench.parent', { i }, { timeoutMs: 60_000 });
}

/** An Ironflow deployment (cluster or dev) with its push worker. */
class IronflowSystem implements System {
  constructor(
    readonly name: SystemName,
    private readonly services: Record<string, ServiceProcess>,
    private readonly worker: ChildProcess,
    private readonly call: (workload: Workload, i: number) => Promise<unknown>,
    private readonly cleanup: () => Promise<void>,
    readonly database?: string,
    private readonly statements: Record<string, string> = {},
  ) {}

  statementFiles(): Record<string, string> {
    return this.statements;
  }

  processes(): Record<string, number[]> {
    const out: Record<string, number[]> = {};
    for (const [role, s] of Object.entries(this.services)) out[role] = [s.pid!];
    out.worker = [this.worker.pid!];
    return out;
  }

  phase(request: PhaseRequest, onCompleted?: (n: number) => void): Promise<PhaseResult> {
    return runPhase(request, this.call, onCompleted);
  }

  async triggerForwards(): Promise<Record<string, number>> {
    const gateway = this.services['api-gateway'];
    if (!gateway) return {};
    const text = await (await fetch(`${gateway.url}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^ironflow_trigger_forwards_total\{result="(\w+)"\} (\d+)$/gm)) out[m[1]] = Number(m[2]);
    return out;
  }

  async stop(): Promise<void> {
    await stopChild(this.worker, 'SIGTERM');
    await Promise.all(Object.values(this.services).map((s) => s.stop(STOP_KILL_AFTER_MS)));
    await this.cleanup();
  }
}

/** Pool sizes per service: the two on the hot path get 8, the others 4. */
const POOLS: Record<ServiceApp, number> = { 'api-gateway': 8, dispatcher: 8, scheduler: 4, 'capacity-scanner': 4, 'audit-writer': 4 };

/**
 * The five services as separate processes on a database of their own and NATS under a cluster id
 * of their own (`IRONFLOW_CLUSTER_ID`), defaults otherwise; the worker registers through the gateway.
 */
export async function startCluster(): Promise<System> {
  const db = await createDatabase('ironflow_bench_cmp');
  const clusterId = `bench${randomBytes(4).toString('hex')}`;
  const environment = `cmp${randomBytes(3).toString('hex')}`;
  const services: Record<string, ServiceProcess> = {};
  const dir = statementDir();
  const statements: Record<string, string> = {};
  for (const [app, pool] of Object.entries(POOLS)) {
    statements[app] = join(dir, `${app}.json`);
    services[app] = benchService(app as ServiceApp, await freePort(), {
      IRONFLOW_DATABASE_URL: db.url,
      NATS_URL,
      IRONFLOW_CLUSTER_ID: clusterId,
      IRONFLOW_POOL_SIZE: String(pool),
      IRONFLOW_NODE_ID: `${app}-1`,
    }, statements[app]);
  }
  const cleanup = async () => {
    await dropDatabase(db.name).catch(() => undefined);
    await deleteStreams(clusterId);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(Object.values(services).map((s) => s.start(READY_TIMEOUT_MS)));
    const gateway = services['api-gateway'].url;
    const worker = await forkReady('worker', [gateway, environment]);
    return new IronflowSystem('cluster', services, worker, ironflowCaller(gateway, environment), cleanup, db.name, statements);
  } catch (err) {
    await Promise.all(Object.values(services).map((s) => s.stop(STOP_KILL_AFTER_MS)));
    await cleanup();
    throw err;
  }
}

/** `ironflow dev` on a SQLite file of its own (in-process bus). */
export async function startDev(): Promise<System> {
  const file = join(tmpdir(), `ironflow-bench-dev-${randomBytes(4).toString('hex')}.db`);
  const port = await freePort();
  const dev = benchService(devApp(file), port, {});
  const environment = 'bench';
  const cleanup = async () => {
    for (const p of [file, `${file}-wal`, `${file}-shm`]) rmSync(p, { force: true });
  };
  try {
    await dev.start(READY_TIMEOUT_MS);
    const worker = await forkReady('worker', [dev.url, environment]);
    return new IronflowSystem('dev', { dev }, worker, ironflowCaller(dev.url, environment), cleanup);
  } catch (err) {
    await dev.stop(STOP_KILL_AFTER_MS);
    await cleanup();
    throw err;
  }
}

/**
 * A single node on PostgreSQL: `ironflow dev` (every service in one process, in-process bus) with
 * `IRONFLOW_DATABASE_URL` on a database of its own, with the services' default tick, scan and
 * poll periods (1000 ms; dev's own are shorter). It runs push dispatch itself, so a sync trigger
 * claims and dispatches its run at once.
 */
export async function startSingle(): Promise<System> {
  const db = await createDatabase('ironflow_bench_single');
  const port = await freePort();
  const dir = statementDir();
  const statements = { single: join(dir, 'single.json') };
  const node = benchService({ script: 'ironflow', args: ['dev'] }, port, {
    IRONFLOW_DATABASE_URL: db.url,
    IRONFLOW_POOL_SIZE: '10',
    IRONFLOW_TICK_MS: '1000',
    IRONFLOW_SCAN_MS: '1000',
    IRONFLOW_DISPATCH_POLL_MS: '1000',
  }, statements.single);
  const environment = 'bench';
  const cleanup = async () => {
    await dropDatabase(db.name).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await node.start(READY_TIMEOUT_MS);
    const worker = await forkReady('worker', [node.url, environment]);
    return new IronflowSystem('single', { single: node }, worker, ironflowCaller(node.url, environment), cleanup, db.name, statements);
  } catch (err) {
    await node.stop(STOP_KILL_AFTER_MS);
    await cleanup();
    throw err;
  }
}

/** DBOS Transact in a process of its own on a database of its own. */
export async function startDbos(): Promise<System> {
  const db = await createDatabase('ironflow_bench_dbos');
  let peer: ChildProcess;
  try {
    peer = await forkReady('dbos-peer', [db.url]);
  } catch (err) {
    await dropDatabase(db.name);
    throw err;
  }
  return {
    name: 'dbos',
    database: db.name,
    processes: () => ({ dbos: [peer.pid!] }),
    statementFiles: () => ({}),
    phase: (request, onCompleted) =>
      new Promise((res, rej) => {
        const onMessage = (m: { progress?: number; result?: PhaseResult; error?: string }) => {
          if (m.progress !== undefined) onCompleted?.(m.progress);
          if (m.result || m.error) {
            peer.off('message', onMessage);
            if (m.result) res(m.result);
            else rej(new Error(m.error));
          }
        };
        peer.on('message', onMessage);
        peer.send(request);
      }),
    stop: async () => {
      const exited = new Promise<void>((r) => (peer.exitCode !== null ? r() : peer.once('exit', () => r())));
      peer.disconnect();
      const timer = setTimeout(() => peer.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
      await dropDatabase(db.name).catch(() => undefined);
    },
  };
}

/** Deletes the JetStream streams of a bench cluster id. Best effort. */
async function deleteStreams(clusterId: string): Promise<void> {
  const { connect } = await import('nats');
  const nc = await connect({ servers: NATS_URL.split(','), name: 'ironflow-bench-cleanup' }).catch(() => undefined);
  if (!nc) return;
  try {
    const jsm = await nc.jetstreamManager();
    const ns = new BusNamespace(clusterId);
    for (const stream of ['EVENTS', 'STEPS', 'RESULTS', 'PUBSUB', 'CANCEL']) await jsm.streams.delete(ns.stream(stream)).catch(() => undefined);
  } finally {
    await nc.close();
  }
}

export const START: Record<SystemName, () => Promise<System>> = { cluster: startCluster, single: startSingle, dev: startDev, dbos: startDbos };
