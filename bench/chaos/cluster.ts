import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { ServiceApp, ServiceProcess, freePort } from '@ironflow/testing';

const run = promisify(execFile);

/** How long a service may take to answer `/ready` after it starts (ms): generous, for a loaded machine. */
const READY_TIMEOUT_MS = 180_000;

/** Settings of the chaos cluster's processes (ms). */
export interface ChaosClusterOptions {
  databaseUrl: string;
  natsUrl: string;
  clusterId: string;
  leaseMs: number;
}

/**
 * The five services as separate OS processes from the build output (two dispatchers, so workers
 * always have one), on the benchmark's own database and `IRONFLOW_CLUSTER_ID`. It kills one with
 * SIGKILL and starts it again on the same port, and keeps each process's count of lost audit rows
 * by event type (`ironflow_audit_write_failures_total`, read from `/metrics` every second and
 * before a kill, so a killed process's count up to its last reading is kept) and the audit rows it
 * held when it was killed (`ironflow_audit_rows_pending` at that last reading).
 */
export class ChaosCluster {
  readonly processes: ServiceProcess[] = [];
  /**
   * Each process's counters, summed over its ended lives and in its current life, keyed
   * `lost:<event_type>` (`ironflow_audit_write_failures_total`), `unanswered:<fate>`
   * (`ironflow_audit_unanswered_rows_total`), `dispatched:push` and `forwards:<result>` (see {@link countsOf}).
   */
  private readonly countsByEarlierLives = new Map<ServiceProcess, Map<string, number>>();
  private readonly countsNow = new Map<ServiceProcess, Map<string, number>>();
  /** Each process's `ironflow_audit_rows_pending` at its last reading. */
  private readonly pendingNow = new Map<ServiceProcess, number>();
  /** Audit rows the killed processes held at their last reading before the kill (lost uncounted, at most). */
  auditRowsPendingAtKills = 0;
  private readonly down = new Set<ServiceProcess>();
  private scraper?: NodeJS.Timeout;
  kills = 0;
  /**
   * Kills whose reading just before failed (the process busy past 2 s): its counts and pending rows
   * are then those of its last reading, up to a second earlier.
   */
  killsWithoutReading = 0;
  /** Restarts that exited before they were ready and were started again. */
  startFailures = 0;

  constructor(private readonly options: ChaosClusterOptions) {}

  get gateway(): ServiceProcess {
    return this.processes[0];
  }

  get dispatchers(): ServiceProcess[] {
    return this.processes.filter((p) => p.app === 'dispatcher');
  }

  async start(): Promise<void> {
    const apps: [ServiceApp, string][] = [
      ['api-gateway', 'gateway-1'],
      ['dispatcher', 'dispatcher-1'],
      ['dispatcher', 'dispatcher-2'],
      ['scheduler', 'scheduler-1'],
      ['capacity-scanner', 'scanner-1'],
      ['audit-writer', 'audit-1'],
    ];
    for (const [app, node] of apps) this.processes.push(new ServiceProcess(app, await freePort(), this.env(node)));
    // The first process migrates the schema; the others start on it.
    // A benchmark that dies or is interrupted leaves no service behind.
    const killAll = () => {
      for (const p of this.processes) void p.kill9();
    };
    process.once('exit', killAll);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        killAll();
        process.exit(1);
      });
    }
    await this.processes[0].start(READY_TIMEOUT_MS);
    await Promise.all(this.processes.slice(1).map((p) => p.start(READY_TIMEOUT_MS)));
    this.scraper = setInterval(() => void this.scrapeAll(), 1000);
  }

  private env(node: string): Record<string, string> {
    const o = this.options;
    return {
      IRONFLOW_DATABASE_URL: o.databaseUrl,
      NATS_URL: o.natsUrl,
      IRONFLOW_CLUSTER_ID: o.clusterId,
      IRONFLOW_NODE_ID: node,
      IRONFLOW_POOL_SIZE: '8',
      IRONFLOW_LEASE_MS: String(o.leaseMs),
      IRONFLOW_TICK_MS: '200',
      IRONFLOW_SCAN_MS: '500',
      IRONFLOW_DISPATCH_POLL_MS: '200',
      IRONFLOW_LOG_LEVEL: 'error',
    };
  }

  /** SIGKILL `victim` (no drain), then start it again; resolves once it answers `/ready`. Throws when it cannot start within 10 minutes. */
  async killAndRestart(victim: ServiceProcess): Promise<void> {
    if (!(await this.scrape(victim))) this.killsWithoutReading += 1;
    this.down.add(victim);
    await victim.kill9();
    this.kills += 1;
    this.countsByEarlierLives.set(victim, addCounts(this.countsByEarlierLives.get(victim), this.countsNow.get(victim)));
    this.countsNow.set(victim, new Map());
    this.auditRowsPendingAtKills += this.pendingNow.get(victim) ?? 0;
    this.pendingNow.set(victim, 0);
    // As an orchestrator would: a process that exits while starting (PostgreSQL restarting, say)
    // or is not ready within 3 minutes (a loaded machine) is started again, for up to 10 minutes.
    const deadline = Date.now() + 600_000;
    for (;;) {
      victim.log.length = 0;
      victim.stdout.length = 0;
      try {
        await victim.restart(READY_TIMEOUT_MS);
        break;
      } catch (err) {
        await victim.kill9(); // a start that timed out leaves its process running
        if (Date.now() > deadline) throw err;
        this.startFailures += 1;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
    this.down.delete(victim);
  }

  /** The processes' audit counters over all their lives: `lost:<event_type>` and `unanswered:<fate>` (see `countsNow`). */
  async auditCounts(): Promise<Map<string, number>> {
    await this.scrapeAll();
    let total = new Map<string, number>();
    for (const p of this.processes) total = addCounts(addCounts(total, this.countsByEarlierLives.get(p)), this.countsNow.get(p));
    return total;
  }

  /**
   * One process's counters over all its lives (read now): the audit keys of {@link countsNow}, and
   * `dispatched:push` (`ironflow_segments_dispatched_total{mode="push"}`: push segments it claimed)
   * and `forwards:<result>` (`ironflow_trigger_forwards_total`: sync triggers handed to a dispatcher).
   */
  async countsOf(p: ServiceProcess): Promise<Map<string, number>> {
    if (!this.down.has(p)) await this.scrape(p);
    return addCounts(this.countsByEarlierLives.get(p), this.countsNow.get(p));
  }

  private async scrapeAll(): Promise<void> {
    await Promise.all(this.processes.filter((p) => !this.down.has(p)).map((p) => this.scrape(p)));
  }

  /** Reads `p`'s `/metrics`; answers whether the reading was taken. */
  private async scrape(p: ServiceProcess): Promise<boolean> {
    try {
      const text = await (await fetch(`${p.url}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
      const read = new Map<string, number>();
      let pending = 0;
      for (const line of text.split('\n')) {
        const failure = /^ironflow_audit_write_failures_total\{event_type="([^"]*)"\} (\S+)$/.exec(line);
        if (failure) read.set(`lost:${failure[1]}`, Number(failure[2]));
        const unanswered = /^ironflow_audit_unanswered_rows_total\{fate="([^"]*)"\} (\S+)$/.exec(line);
        if (unanswered) read.set(`unanswered:${unanswered[1]}`, Number(unanswered[2]));
        if (line.startsWith('ironflow_audit_rows_pending ')) pending = Number(line.split(' ').pop());
        const pushed = /^ironflow_segments_dispatched_total\{mode="push"\} (\S+)$/.exec(line);
        if (pushed) read.set('dispatched:push', Number(pushed[1]));
        const forwards = /^ironflow_trigger_forwards_total\{result="([^"]*)"\} (\S+)$/.exec(line);
        if (forwards) read.set(`forwards:${forwards[1]}`, Number(forwards[2]));
      }
      if (this.down.has(p)) return false;
      // Counters only grow within a life: keep the larger of two readings that raced.
      const now = this.countsNow.get(p) ?? new Map<string, number>();
      for (const [key, n] of read) now.set(key, Math.max(n, now.get(key) ?? 0));
      this.countsNow.set(p, now);
      this.pendingNow.set(p, pending);
      return true;
    } catch {
      return false; // down or busy: the next reading counts it
    }
  }

  /** Drains every process (SIGTERM) and stops reading metrics. */
  async stop(): Promise<void> {
    clearInterval(this.scraper);
    await Promise.all(this.processes.map((p) => p.stop()));
  }
}

/** `a` plus `b`, by key (a new map). */
function addCounts(a: Map<string, number> | undefined, b: Map<string, number> | undefined): Map<string, number> {
  const sum = new Map(a ?? []);
  for (const [k, n] of b ?? []) sum.set(k, (sum.get(k) ?? 0) + n);
  return sum;
}

/**
 * Restarts PostgreSQL with `command` (a shell command line), then waits until `databaseUrl`
 * accepts a query again (deadline 60 s). Answers how long the database was unreachable (ms).
 */
export async function restartPostgres(command: string, databaseUrl: string): Promise<number> {
  const started = Date.now();
  await run('/bin/sh', ['-c', command], { timeout: 120_000 });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const c = new Client({ connectionString: databaseUrl });
    try {
      await c.connect();
      await c.query('SELECT 1');
      return Date.now() - started;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`PostgreSQL did not come back within 60 s after \`${command}\`: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      await c.end().catch(() => undefined);
    }
  }
}
