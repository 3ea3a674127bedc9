/**
 * TriggerSync latency through the engine on PostgreSQL + NATS JetStream, with a pull worker
 * answering in-process (DESIGN.md "Performance budgets": TriggerSync p50 at or under 3.2 ms).
 *
 * One engine (no loops started: no scheduler, no push dispatcher) over a schema of its own and a
 * real NATS connection. A function `echo` (pull) is triggered by `bench.ping`. An in-process
 * worker wakes on the STEPS hint the trigger publishes (falling back to a poll every
 * `dispatchPollMs`, the engine default 1000 ms, if a hint is lost), claims with
 * `engine.pull.poll`, and reports `completed` at once with `engine.pull.update`. The caller runs
 * `engine.api.triggerSync` N times in sequence, twice:
 *
 *   frames      RESULTS frames delivered: the caller is nudged by the frame and reads the run.
 *   store-poll  every RESULTS publish fails (fault hook): the caller finds the outcome by reading
 *               the store every `syncPollMs` (100 ms, the specification's value).
 *
 * Usage: node dist/bench/trigger-sync-latency.js [--runs 500] [--warmup 20] [--ack] [--concurrency 1]
 *   --ack          the worker also acks each job (R5) before reporting, as the SDK's pull worker does.
 *   --concurrency  callers running at once (default 1: sequential calls, the budget's measure).
 */
import { randomBytes } from 'node:crypto';
import { NatsBus, subjects } from '@ironflow/bus';
import { CallScope, JobAssignment } from '@ironflow/contracts';
import { Engine } from '@ironflow/engine';
import { openStore } from '@ironflow/store';
import { DATABASE_URL, NATS_URL, Summary, benchSchema, dropSchema, flagArg, intArg, machineInfo, nowMs, purgeScope, schemaClient, sleep, summarize, table, writeResults } from './lib/common';
import { CountingStore, perCall } from './lib/counting-store';
import { FaultyBus, isResultsSubject } from '@ironflow/testing';
import { progress } from './lib/progress';

const WORKER_ID = 'bench-worker';
const FUNCTION_ID = 'echo';
const EVENT = 'bench.ping';
const POLL_BATCH = 10;

/** When the worker saw each run (ms, `nowMs` clock). */
interface WorkerMarks {
  claimed: number;
  reported: number;
  viaHint: boolean;
}

/**
 * The in-process pull worker: polls when a STEPS hint arrives (or every `fallbackPollMs`), and
 * reports each job `completed` at once. A hint that arrives during a poll makes it poll again,
 * so none is missed.
 */
class HintDrivenWorker {
  readonly marks = new Map<string, WorkerMarks>();
  hintPolls = 0;
  fallbackPolls = 0;
  errors = 0;
  private stopped = false;
  private hinted = false;
  private wake: (() => void) | null = null;
  private readonly loop: Promise<void>;
  private readonly unsubscribe: () => void;

  constructor(private readonly engine: Engine, scope: CallScope, private readonly fallbackPollMs: number, private readonly ack: boolean) {
    const sub = engine.resources.bus.subscribe(subjects.stepsHint(scope.project, scope.env, 'pull'), () => {
      this.hinted = true;
      this.wake?.();
    });
    this.unsubscribe = () => sub.unsubscribe();
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    let viaHint = false;
    while (!this.stopped) {
      this.hinted = false;
      let jobs: JobAssignment[] = [];
      try {
        jobs = await this.engine.pull.poll(WORKER_ID, POLL_BATCH);
      } catch {
        this.errors += 1;
      }
      if (jobs.length) {
        if (viaHint) this.hintPolls += 1;
        else this.fallbackPolls += 1;
      }
      const claimed = nowMs();
      await Promise.all(jobs.map((job) => this.complete(job, claimed, viaHint)));
      // A poll that filled up may have left jobs behind: poll again at once. Otherwise wait for the
      // next hint (one that arrived during this poll makes it poll again) or the fallback period.
      if (jobs.length < POLL_BATCH && !this.hinted && !this.stopped) {
        viaHint = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => { this.wake = null; resolve(false); }, this.fallbackPollMs);
          this.wake = () => { clearTimeout(timer); this.wake = null; resolve(true); };
        });
      } else {
        viaHint = true;
      }
    }
  }

  private async complete(job: JobAssignment, claimed: number, viaHint: boolean): Promise<void> {
    const fence = { execution_seq: job.execution_seq, lease_token: job.lease_token };
    try {
      if (this.ack) await this.engine.pull.ack(WORKER_ID, job.job_id, { run_id: job.run_id, ...fence });
      await this.engine.pull.update(WORKER_ID, job.job_id, { status: 'completed', output: { pong: job.event.data }, ...fence });
      this.marks.set(job.run_id, { claimed, reported: nowMs(), viaHint });
    } catch {
      this.errors += 1;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    this.unsubscribe();
    await this.loop;
  }
}

interface ModeResult {
  mode: string;
  description: string;
  latencyMs: Summary;
  /** Where the time went, per call (ms): start → worker claimed, claimed → report committed, report → caller returned. */
  breakdownMs: { toClaim: Summary; report: Summary; reportToReturn: Summary };
  /** Calls that took at least 90 % of `syncPollMs` from the report to the caller's return (frames mode: a missed nudge). */
  callsWaitingAPollPeriod: number;
  resultPublishFailures: number;
  workerFallbackPolls: number;
  errors: number;
  /** The engine's units of work (transactions) and reads per call, by name. */
  perCall: { unitsOfWork: Record<string, { perCall: number; meanMs: number }>; reads: Record<string, { perCall: number; meanMs: number }> };
}

async function measure(engine: Engine, store: CountingStore, scope: CallScope, worker: HintDrivenWorker, mode: string, description: string, runs: number, warmup: number, syncPollMs: number, concurrency: number): Promise<ModeResult> {
  const call = async (i: number) => {
    const started = nowMs();
    const { results } = await engine.api.triggerSync(scope, { event: EVENT, data: { i }, timeoutMs: 30_000 });
    const ended = nowMs();
    const result = results[0];
    if (!result || result.status !== 'completed') throw new Error(`call ${i}: expected one completed run, got ${JSON.stringify(results)}`);
    return { started, ended, runId: result.runId };
  };
  for (let i = 0; i < warmup; i += 1) await call(-1 - i);
  const fallbackBefore = worker.fallbackPolls;
  const errorsBefore = worker.errors;
  const failuresBefore = await counter(engine, 'ironflow_run_result_publish_failures_total');
  await engine.resources.followUps.drain(5000);
  const countsBefore = store.snapshot();
  const latency: number[] = [];
  const toClaim: number[] = [];
  const report: number[] = [];
  const reportToReturn: number[] = [];
  const bar = progress(`${mode.padEnd(10)}`, runs);
  let next = 0;
  let done = 0;
  const caller = async () => {
    for (let i = next++; i < runs; i = next++) {
      const { started, ended, runId } = await call(i);
      latency.push(ended - started);
      const marks = worker.marks.get(runId);
      if (marks) {
        toClaim.push(marks.claimed - started);
        report.push(marks.reported - marks.claimed);
        reportToReturn.push(ended - marks.reported);
      }
      bar.update(++done);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, caller));
  bar.stop();
  await engine.resources.followUps.drain(5000);
  const countsAfter = store.snapshot();
  return {
    mode,
    description,
    latencyMs: summarize(latency),
    breakdownMs: { toClaim: summarize(toClaim), report: summarize(report), reportToReturn: summarize(reportToReturn) },
    callsWaitingAPollPeriod: reportToReturn.filter((ms) => ms >= 0.9 * syncPollMs).length,
    resultPublishFailures: (await counter(engine, 'ironflow_run_result_publish_failures_total')) - failuresBefore,
    workerFallbackPolls: worker.fallbackPolls - fallbackBefore,
    errors: worker.errors - errorsBefore,
    perCall: { unitsOfWork: perCall(countsBefore.units, countsAfter.units, runs), reads: perCall(countsBefore.reads, countsAfter.reads, runs) },
  };
}

/** What one write transaction costs on this PostgreSQL (the commit's WAL flush dominates). */
async function commitBaseline(schema: string): Promise<Summary> {
  const client = await schemaClient(schema);
  try {
    await client.query('CREATE TABLE bench_commit_probe (x INT)');
    const samples: number[] = [];
    for (let i = 0; i < 200; i += 1) {
      const t0 = nowMs();
      await client.query('BEGIN');
      await client.query('INSERT INTO bench_commit_probe VALUES ($1)', [i]);
      await client.query('COMMIT');
      samples.push(nowMs() - t0);
    }
    await client.query('DROP TABLE bench_commit_probe');
    return summarize(samples);
  } finally {
    await client.end();
  }
}

async function counter(engine: Engine, name: string): Promise<number> {
  const metric = engine.resources.metrics.registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.reduce((sum, v) => sum + v.value, 0);
}

async function main(): Promise<void> {
  const runs = intArg('runs', 500);
  const warmup = intArg('warmup', 20);
  const ack = flagArg('ack');
  const concurrency = intArg('concurrency', 1);
  const schema = benchSchema('tsync');
  const suffix = randomBytes(4).toString('hex');
  const scope: CallScope = { project: `pbench${suffix}`, env: `ebench${suffix}` };
  const poolSize = 10;
  const opened = await openStore({ url: DATABASE_URL, schema, poolSize });
  const store = new CountingStore(opened.store);
  const clock = opened.clock;
  const bus = new FaultyBus(await NatsBus.connect({ url: NATS_URL, name: 'ironflow-bench-trigger-sync' }));
  // Defaults of the specification throughout: syncPollMs 100, dispatchPollMs 1000 (used here as
  // the worker's fallback poll; the hint makes it claim at once, so no short poll is needed).
  const engine = new Engine({ store, clock, bus, poolSize });
  const config = engine.resources.config;
  let worker: HintDrivenWorker | undefined;
  const results: ModeResult[] = [];
  const startedAt = new Date().toISOString();
  let commitMs: Summary | undefined;
  try {
    commitMs = await commitBaseline(schema);
    await engine.api.registerFunction(scope, { id: FUNCTION_ID, mode: 'pull', triggers: [{ event: EVENT }], retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
    await engine.pull.register(scope, WORKER_ID, { worker_id: WORKER_ID, function_ids: [FUNCTION_ID], max_concurrent_jobs: 10 });
    worker = new HintDrivenWorker(engine, scope, config.dispatchPollMs, ack);
    process.stderr.write(`TriggerSync latency: ${runs} sequential calls per mode (+${warmup} warm-up)${concurrency > 1 ? `, ${concurrency} callers at once` : ''}, PostgreSQL schema ${schema}, NATS ${NATS_URL}${ack ? ', worker acks' : ''}\n`);
    results.push(await measure(engine, store, scope, worker, 'frames', 'RESULTS frames delivered', runs, warmup, config.syncPollMs, concurrency));
    bus.failPublishes(isResultsSubject);
    results.push(await measure(engine, store, scope, worker, 'store-poll', `every RESULTS publish fails; the caller reads the store every ${config.syncPollMs} ms`, runs, warmup, config.syncPollMs, concurrency));
    bus.heal();
  } finally {
    await worker?.stop();
    await engine.stop(2000);
    await sleep(50);
    await bus.close();
    await store.close();
    await dropSchema(schema);
    await purgeScope(NATS_URL, scope.project, scope.env).catch(() => undefined);
  }

  const rows: (string | number)[][] = [['mode', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms', 'max ms']];
  for (const r of results) rows.push([r.mode, r.latencyMs.n, r.latencyMs.p50, r.latencyMs.p90, r.latencyMs.p99, r.latencyMs.mean, r.latencyMs.max]);
  console.log(`\nTriggerSync latency (${runs} ${concurrency > 1 ? `calls, ${concurrency} callers at once` : 'sequential calls'}, pull worker in-process, PostgreSQL + NATS)\n`);
  console.log(table(rows));
  console.log(`\nBudget (DESIGN.md "Performance budgets"): p50 at or under 3.2 ms. Baseline on this PostgreSQL: one INSERT + COMMIT round trip p50 ${commitMs?.p50} ms, p99 ${commitMs?.p99} ms.`);
  const parts: (string | number)[][] = [['mode / part (p50 | p99 ms)', 'start→claimed', 'report tx', 'report→return']];
  for (const r of results) {
    const b = r.breakdownMs;
    parts.push([r.mode, `${b.toClaim.p50} | ${b.toClaim.p99}`, `${b.report.p50} | ${b.report.p99}`, `${b.reportToReturn.p50} | ${b.reportToReturn.p99}`]);
  }
  console.log(`\n${table(parts)}\n`);
  for (const r of results) {
    const fmt = (o: Record<string, { perCall: number; meanMs: number }>) => Object.entries(o).map(([k, v]) => `${k} ×${v.perCall} (${v.meanMs} ms)`).join(', ');
    console.log(`${r.mode}: per call, units of work: ${fmt(r.perCall.unitsOfWork)}; reads: ${fmt(r.perCall.reads)}`);
    console.log(`${r.mode}: ${r.resultPublishFailures} RESULTS publish failures, ${r.callsWaitingAPollPeriod} calls waited ≥ ${0.9 * config.syncPollMs} ms after the report, ${r.workerFallbackPolls} claims by the worker's fallback poll, ${r.errors} worker errors`);
  }
  const path = writeResults(concurrency > 1 ? `trigger-sync-latency-c${concurrency}` : 'trigger-sync-latency', {
    benchmark: 'trigger-sync-latency',
    startedAt,
    machine: await machineInfo(),
    nats: NATS_URL,
    commitBaselineMs: commitMs,
    parameters: { runs, concurrency, warmup, workerAcks: ack, poolSize, syncPollMs: config.syncPollMs, dispatchPollMs: config.dispatchPollMs, workerFallbackPollMs: config.dispatchPollMs },
    results,
  });
  console.log(`\nwrote ${path}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
