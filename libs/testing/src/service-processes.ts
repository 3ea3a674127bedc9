import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

/** The repository root: the first directory above this file with an `nx.json` (from `libs/testing/src` or `dist/libs/testing/src`). */
function repoRoot(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'nx.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no nx.json above ${__dirname}: run from the repository or its dist/`);
  }
}

export type ServiceApp = 'api-gateway' | 'dispatcher' | 'scheduler' | 'capacity-scanner' | 'audit-writer';

/** `ironflow dev` (every service in one process) as a `ServiceProcess` app, on the SQLite file `db`. */
export const devApp = (db: string) => ({ script: 'ironflow', args: ['dev', '--db', db] });

/** A TCP port of 127.0.0.1 free at the time of the call. */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

/**
 * Node options for one service's process, from `IRONFLOW_NODE_ARGS_<APP>` in this process's
 * environment (the app's name upper-cased, `-` as `_`; e.g. `IRONFLOW_NODE_ARGS_DISPATCHER=
 * "--cpu-prof --cpu-prof-dir=/tmp/prof"`), split on spaces: a way to profile one service of a
 * cluster (`--cpu-prof` is not allowed in `NODE_OPTIONS`). None by default. The benchmarks' own
 * child processes take theirs the same way (`IRONFLOW_NODE_ARGS_WORKER` for bench/compare's worker).
 */
export function nodeArgsFor(script: string): string[] {
  const value = process.env[`IRONFLOW_NODE_ARGS_${script.toUpperCase().replace(/-/g, '_')}`];
  return value ? value.split(' ').filter((a) => a !== '') : [];
}

/**
 * One service as its own OS process, started from the build output (`dist/apps/<app>`) and
 * configured by environment, as in a cluster: the parent's environment with `env` over it (a
 * variable set to `undefined` there is not passed on). `kill9()` is a crash; `restart()` starts it
 * again with the same configuration.
 */
export class ServiceProcess {
  private child?: ChildProcess;
  private exitedAt?: Promise<number | null>;
  readonly log: string[] = [];
  /** stdout alone, as written. */
  readonly stdout: string[] = [];

  constructor(
    readonly app: ServiceApp | ReturnType<typeof devApp>,
    readonly port: number,
    private readonly env: Record<string, string | undefined>,
  ) {}

  /** The OS process id of the last start. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The exit code once the process exited (null when killed by a signal), else undefined. */
  get exitCode(): number | null | undefined {
    return this.child?.exitCode ?? (this.child?.signalCode ? null : undefined);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the process and resolves once `/ready` answers 200; throws when it exits first or is not ready within `readyTimeoutMs` (default 60000). */
  async start(readyTimeoutMs = 60_000): Promise<void> {
    const script = typeof this.app === 'string' ? this.app : this.app.script;
    const args = typeof this.app === 'string' ? [] : [...this.app.args, '--port', String(this.port)];
    const env: NodeJS.ProcessEnv = { ...process.env, ...this.env, IRONFLOW_PORT: String(this.port), IRONFLOW_HOST: '127.0.0.1' };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
    const child = spawn(process.execPath, [...nodeArgsFor(script), join(repoRoot(), `dist/apps/${script}/src/main.js`), ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout!.on('data', (d) => { this.log.push(String(d)); this.stdout.push(String(d)); });
    child.stderr!.on('data', (d) => this.log.push(String(d)));
    this.exitedAt = new Promise((res) => child.on('exit', (code) => res(code)));
    // Generous: two cluster suites can boot a dozen processes at once on a loaded 2-core machine.
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}: ${this.log.join('').slice(-2000)}`);
      try {
        const res = await fetch(`${this.url}/ready`);
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${script} not ready after ${readyTimeoutMs / 1000} s: ${this.log.join('').slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGKILL: no drain, no follow-ups, connections cut. */
  async kill9(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exitedAt;
  }

  /**
   * SIGTERM and wait for the drain. Resolves with the exit code (null when killed by a signal).
   * With `killAfterMs`, a process still running that long after the SIGTERM gets a SIGKILL.
   */
  async stop(killAfterMs?: number): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
    child.kill('SIGTERM');
    const timer = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Sends SIGTERM and returns at once; `exited` resolves with the exit code. */
  terminate(): void {
    this.child?.kill('SIGTERM');
  }

  /** Resolves with the exit code when the process exited. */
  get exited(): Promise<number | null> {
    return this.exitedAt ?? Promise.resolve(null);
  }

  async restart(readyTimeoutMs?: number): Promise<void> {
    await this.start(readyTimeoutMs);
  }
}
