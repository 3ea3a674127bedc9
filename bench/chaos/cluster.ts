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
 * (`ironflow_audit_write_failures_total`, read from `/metrics` every second and before a kill, so
 * a killed process's count up to its last reading is kept).
 */
export class ChaosCluster {
  readonly processes: ServiceProcess[] = [];
  private readonly lostByEarlierLives = new Map<ServiceProcess, number>();
  private readonly lostNow = new Map<ServiceProcess, number>();
  private readonly down = new Set<ServiceProcess>();
  private scraper?: NodeJS.Timeout;
  kills = 0;
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
    await this.scrape(victim);
    this.down.add(victim);
    await victim.kill9();
    this.kills += 1;
    this.lostByEarlierLives.set(victim, (this.lostByEarlierLives.get(victim) ?? 0) + (this.lostNow.get(victim) ?? 0));
    this.lostNow.set(victim, 0);
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

  /** Audit rows the processes counted as lost, over all their lives. */
  async auditRowsCountedLost(): Promise<number> {
    await this.scrapeAll();
    let total = 0;
    for (const p of this.processes) total += (this.lostByEarlierLives.get(p) ?? 0) + (this.lostNow.get(p) ?? 0);
    return total;
  }

  private async scrapeAll(): Promise<void> {
    await Promise.all(this.processes.filter((p) => !this.down.has(p)).map((p) => this.scrape(p)));
  }

  private async scrape(p: ServiceProcess): Promise<void> {
    try {
      const text = await (await fetch(`${p.url}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
      const lost = text
        .split('\n')
        .filter((l) => l.startsWith('ironflow_audit_write_failures_total{'))
        .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
      if (!this.down.has(p)) this.lostNow.set(p, Math.max(lost, this.lostNow.get(p) ?? 0));
    } catch {
      // down or busy: the next reading counts it
    }
  }

  /** Drains every process (SIGTERM) and stops reading metrics. */
  async stop(): Promise<void> {
    clearInterval(this.scraper);
    await Promise.all(this.processes.map((p) => p.stop()));
  }
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
