import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { Pool } from 'pg';
import { type IronflowClient, RunCancelledError, RunFailedError, createClient, createFunction, createWorker, serve, Worker } from '@ironflow/sdk';

/** The kinds of runs the chaos run starts, by triggering event, and the outcome each should reach. */
export const KINDS = {
  invoke: { event: 'chaos.invoke', functionId: 'chaos.parent', expected: 'completed' },
  sleep: { event: 'chaos.sleep', functionId: 'chaos.sleeper', expected: 'completed' },
  wait: { event: 'chaos.wait', functionId: 'chaos.waiter', expected: 'completed' },
  cancel: { event: 'chaos.cancel', functionId: 'chaos.cancellable', expected: 'cancelled' },
  sync: { event: 'chaos.sync', functionId: 'chaos.synced', expected: 'completed' },
} as const;
export type Kind = keyof typeof KINDS;

/** The share of each kind among the runs started (sums to 1). */
const MIX: [Kind, number][] = [['invoke', 0.35], ['sleep', 0.2], ['wait', 0.2], ['cancel', 0.1], ['sync', 0.15]];

/** The kind of the `i`-th run (deterministic, spread evenly). */
export function kindOf(i: number): Kind {
  const x = ((i * 0.6180339887) % 1 + 1) % 1;
  let acc = 0;
  for (const [kind, share] of MIX) {
    acc += share;
    if (x < acc) return kind;
  }
  return 'invoke';
}

const quiet = { warn: () => undefined, error: () => undefined };

/** Handler executions the workers saw, by function (a killed dispatcher may cost a repeat). */
export const executions = new Map<string, number>();
const count = (fn: string) => executions.set(fn, (executions.get(fn) ?? 0) + 1);

const child = createFunction({ id: 'chaos.child', mode: 'push' }, async ({ event, step }) => {
  count('chaos.child');
  const n = (event.data as { n: number }).n;
  return step.run('double', async () => ({ doubled: 2 * n }));
});

const parent = createFunction({ id: 'chaos.parent', mode: 'pull', triggers: [{ event: KINDS.invoke.event }] }, async ({ event, step }) => {
  count('chaos.parent');
  const n = (event.data as { n: number }).n;
  const prepared = await step.run('prepare', async () => ({ n }));
  const result = (await step.invoke('chaos.child', { n: prepared.n }, { timeout: '30m' })) as { doubled: number };
  return { n, doubled: result.doubled };
});

const sleeper = createFunction({ id: 'chaos.sleeper', mode: 'pull', triggers: [{ event: KINDS.sleep.event }] }, async ({ event, step }) => {
  count('chaos.sleeper');
  const n = (event.data as { n: number }).n;
  await step.run('before', async () => n);
  await step.sleep('nap', 500 + (n % 5) * 500);
  return { n, slept: true };
});

const waiter = createFunction({ id: 'chaos.waiter', mode: 'pull', triggers: [{ event: KINDS.wait.event }] }, async ({ event, step }) => {
  count('chaos.waiter');
  const n = (event.data as { n: number }).n;
  const approval = await step.waitForEvent<{ data: { key: string } }>('approval', { event: 'chaos.approved', match: 'data.key', timeout: '30m' });
  return { n, approvedFor: approval?.data?.key };
});

const cancellable = createFunction({ id: 'chaos.cancellable', mode: 'pull', triggers: [{ event: KINDS.cancel.event }] }, async ({ event, step }) => {
  count('chaos.cancellable');
  await step.run('start', async () => (event.data as { n: number }).n);
  // Nobody sends this event: the run ends when the benchmark cancels it.
  await step.waitForEvent('never', { event: 'chaos.never', match: 'data.key', timeout: '30m' });
  return 'not cancelled';
});

/**
 * The sync kind: a push function the benchmark calls with TriggerSync (`emitSync`), so the
 * api-gateway claims and calls it itself (`IRONFLOW_GATEWAY_PUSH`). The handler holds the call
 * 50–300 ms before its step, so a gateway kill can land while the push call is in flight.
 */
const synced = createFunction({ id: 'chaos.synced', mode: 'push', triggers: [{ event: KINDS.sync.event }] }, async ({ event, step }) => {
  count('chaos.synced');
  const n = (event.data as { n: number }).n;
  await new Promise((r) => setTimeout(r, 50 + (n % 6) * 50));
  const { tripled } = await step.run('triple', async () => ({ tripled: 3 * n }));
  return { n, tripled };
});

export const PULL_FUNCTIONS = [parent, sleeper, waiter, cancellable];
export const PUSH_FUNCTIONS = [child, synced];

/** The workers of the run: a push endpoint for the child and the sync function, and a stream worker on each dispatcher. */
export class ChaosWorkers {
  private push?: Server;
  private readonly workers: Worker[] = [];

  async start(gatewayUrl: string, env: string, dispatcherUrls: string[]): Promise<void> {
    this.push = createServer(serve({ functions: PUSH_FUNCTIONS }));
    await new Promise<void>((r) => this.push!.listen(0, '127.0.0.1', r));
    const client = createClient({ serverUrl: gatewayUrl, environment: env });
    for (const fn of PUSH_FUNCTIONS) await client.registerFunction(fn, { endpointUrl: `http://127.0.0.1:${(this.push.address() as AddressInfo).port}/` });
    for (const fn of PULL_FUNCTIONS) await client.registerFunction(fn);
    for (const url of dispatcherUrls) {
      const w = createWorker({ transport: 'stream', serverUrl: url, environment: env, functions: PULL_FUNCTIONS, registerFunctions: false, reconnectDelayMs: 200, heartbeatIntervalMs: 1000, maxConcurrentJobs: 32, logger: quiet });
      await w.start();
      this.workers.push(w);
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop().catch(() => undefined)));
    if (this.push) await new Promise((r) => this.push!.close(r));
  }
}

/**
 * Calls `attempt` until it resolves (the gateway may be down or restarting), at most until
 * `deadline` (ms since the epoch) or until `abandon()` answers true; then throws the last error.
 */
export async function persist<T>(what: string, attempt: () => Promise<T>, deadline: number, abandon: () => boolean = () => false): Promise<T> {
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (Date.now() > deadline || abandon()) throw new Error(`${what}: still failing at the deadline: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * The drivers beside the workers, on the benchmark's own database reads: approvals for waiters that
 * reached their `waitForEvent`, and cancels for the cancellable runs (at a random point of their
 * life: before, during or after their first segment). Each call is repeated until the gateway
 * takes it; an approval carries an idempotency key, and a cancel of an ended run is a no-op.
 */
export class ChaosDrivers {
  private readonly approved = new Set<string>();
  private readonly cancelled = new Set<string>();
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  approvals = 0;
  cancels = 0;

  constructor(
    private readonly db: Pool,
    private readonly gatewayUrl: string,
    private readonly env: string,
    private readonly deadline: number,
  ) {}

  start(): void {
    const loop = () => {
      this.running = this.pass().catch(() => undefined).finally(() => {
        if (this.timer !== undefined) this.timer = setTimeout(loop, 300);
      });
    };
    this.timer = setTimeout(loop, 300);
  }

  async stop(): Promise<void> {
    const t = this.timer;
    this.timer = undefined;
    clearTimeout(t);
    await this.running;
  }

  private async pass(): Promise<void> {
    const client = createClient({ serverUrl: this.gatewayUrl, environment: this.env, timeoutMs: 5000 });
    const waiting = (await this.db.query(
      `SELECT s.run_id, r.input FROM steps s JOIN runs r ON r.id = s.run_id
       WHERE r.function_id = 'chaos.waiter' AND s.type = 'wait_for_event' AND s.status = 'waiting'`,
    )).rows as { run_id: string; input: string }[];
    const approvals = waiting.filter((w) => !this.approved.has(w.run_id)).map(async (w) => {
      const key = (JSON.parse(w.input) as { key: string }).key;
      await persist(`approve ${w.run_id}`, () => client.emit('chaos.approved', { key }, { idempotencyKey: `approve-${key}` }), this.deadline);
      this.approved.add(w.run_id);
      this.approvals += 1;
    });
    const cancellable = (await this.db.query(
      `SELECT id, input FROM runs WHERE function_id = 'chaos.cancellable' AND status NOT IN ('completed', 'failed', 'cancelled')`,
    )).rows as { id: string; input: string }[];
    const cancels = cancellable
      .filter((r) => !this.cancelled.has(r.id) && Math.random() < 0.3)
      .map(async (r) => {
        await persist(`cancel ${r.id}`, () => client.cancelRun(r.id, 'chaos').catch((err: { code?: string; status?: number }) => {
          if (err.status !== undefined && err.status >= 400 && err.status < 500) return undefined; // ended meanwhile
          throw err;
        }), this.deadline);
        this.cancelled.add(r.id);
        this.cancels += 1;
      });
    await Promise.all([...approvals, ...cancels]);
  }
}

/** What a sync call finally answered for its run (`status` lowercase; `output` of a completed run). */
export interface SyncAnswer {
  runId: string;
  status: string;
  output: unknown;
}

/**
 * The sync kind's callers: each run is started with TriggerSync (`emitSync`, idempotency key
 * `run-<n>`, 10 s wait) and the call is repeated with the same key until it answers an ended run.
 * A call that fails (the gateway killed during the call: connection reset, `UNAVAILABLE` while it
 * drains, a timeout) or answers a run not yet ended is not an engine failure: it is counted
 * (`callFailures`, `callsUnended`) and repeated; the same key waits for the same run, never a
 * second one. The calls run beside the emitters (a call may wait out a lease's recovery).
 */
export class SyncCallers {
  /** The final answer of each sync run, by its `n`. */
  readonly answers = new Map<number, SyncAnswer>();
  /** Calls that threw for another reason than the run's outcome, by error code. */
  readonly failuresByCode = new Map<string, number>();
  callFailures = 0;
  /** The sync runs (by `n`) with at least one failed call. */
  readonly runsWithFailedCalls = new Set<number>();
  /** Calls that answered at their deadline with the run still going (repeated). */
  callsUnended = 0;
  /** Sync calls in flight at each kill of the api-gateway, summed. */
  inFlightAtGatewayKills = 0;
  private readonly calls = new Set<Promise<void>>();
  private inFlight = 0;
  private gaveUp: unknown;

  constructor(
    private readonly client: IronflowClient,
    private readonly deadline: number,
    private readonly abandon: () => boolean,
  ) {}

  /** Starts the sync run `n` (not awaited: {@link settled} waits for every call). */
  start(n: number): void {
    const p: Promise<void> = this.call(n)
      .catch((err: unknown) => {
        this.gaveUp ??= err; // thrown by settled(); kept here so it is never an unhandled rejection
      })
      .finally(() => this.calls.delete(p));
    this.calls.add(p);
  }

  /** Notes a kill of the api-gateway (how many sync calls it cut). */
  gatewayKilled(): void {
    this.inFlightAtGatewayKills += this.inFlight;
  }

  /** Resolves when every call ended; then rejects with the first call that gave up (deadline, or `abandon`). */
  async settled(): Promise<void> {
    while (this.calls.size > 0) await Promise.all([...this.calls]);
    if (this.gaveUp !== undefined) throw this.gaveUp;
  }

  private async call(n: number): Promise<void> {
    for (;;) {
      let unended: string | undefined;
      this.inFlight += 1;
      try {
        const res = await this.client.emitSync<{ tripled?: number }>(KINDS.sync.event, { n, key: `k${n}` }, { idempotencyKey: `run-${n}`, timeoutMs: 10_000 });
        if (TERMINAL.has(res.status)) {
          this.answers.set(n, { runId: res.runId, status: res.status, output: res.output });
          return;
        }
        this.callsUnended += 1;
        unended = res.status;
      } catch (err) {
        if (err instanceof RunFailedError || err instanceof RunCancelledError) {
          this.answers.set(n, { runId: err.runId, status: err instanceof RunFailedError ? 'failed' : 'cancelled', output: null });
          return;
        }
        this.callFailures += 1;
        this.runsWithFailedCalls.add(n);
        const code = (err as { code?: string }).code ?? 'unknown';
        this.failuresByCode.set(code, (this.failuresByCode.get(code) ?? 0) + 1);
        if (Date.now() > this.deadline || this.abandon()) throw new Error(`sync run ${n}: still failing at the deadline: ${String(err)}`);
        await new Promise((r) => setTimeout(r, 200));
      } finally {
        this.inFlight -= 1;
      }
      if (Date.now() > this.deadline || this.abandon()) throw new Error(`sync run ${n}: ${unended ? `still ${unended}` : 'its call still failing'} at the deadline`);
    }
  }
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
