/**
 * Shared helpers of the engine's correctness tests (not a test suite: jest runs `*.spec.ts` only,
 * and the build excludes `*.test.ts`, so this file never ships). Reads go straight to the store,
 * so a test compares the rows themselves, not an API view of them.
 */
import { JobAssignment, JobUpdateBody, RegisterFunctionInput } from '@ironflow/contracts';
import { Engine } from '@ironflow/engine';
import { RunRecord, StepRecord, StoreClock, runsSql, stepsSql } from '@ironflow/store';
import { SCOPE, TestEngine } from '@ironflow/testing';
import { Counter } from 'prom-client';

export const WORKER = 'w1';

export async function registerPull(t: TestEngine, input: Omit<RegisterFunctionInput, 'mode'>): Promise<void> {
  await t.engine.api.registerFunction(SCOPE, { ...input, mode: 'pull' });
}

export async function registerWorker(t: TestEngine, functionIds: string[], workerId = WORKER): Promise<void> {
  await t.engine.pull.register(SCOPE, workerId, { worker_id: workerId, function_ids: functionIds, max_concurrent_jobs: 50 });
}

/** Polls exactly one job (fails the test otherwise). */
export async function pollOne(t: TestEngine, workerId = WORKER): Promise<JobAssignment> {
  const jobs = await t.engine.pull.poll(workerId, 1);
  expect(jobs).toHaveLength(1);
  return jobs[0];
}

/** Polls one job and acks it, as the SDK does before user code. */
export async function pollAndAck(t: TestEngine, workerId = WORKER): Promise<JobAssignment> {
  const job = await pollOne(t, workerId);
  await t.engine.pull.ack(workerId, job.job_id, { run_id: job.run_id, execution_seq: job.execution_seq, lease_token: job.lease_token });
  return job;
}

/** The fence fields a worker echoes on every update (WIRE-PROTOCOL.md 3.8). */
export function fenced(job: JobAssignment, body: Omit<JobUpdateBody, 'execution_seq' | 'lease_token'>): JobUpdateBody {
  return { ...body, execution_seq: job.execution_seq, lease_token: job.lease_token };
}

export async function readRun(t: { db: TestEngine['db'] } | TestEngine, runId: string): Promise<RunRecord> {
  const run = await t.db.store.read('test.readRun', (tx) => runsSql.getRun(tx, runId));
  if (!run) throw new Error(`run ${runId} is not in the store`);
  return run;
}

export async function readSteps(t: TestEngine, runId: string): Promise<StepRecord[]> {
  return t.db.store.read('test.readSteps', (tx) => stepsSql.listSteps(tx, runId));
}

export async function readStep(t: TestEngine, runId: string, stepId: string): Promise<StepRecord> {
  const step = await t.db.store.read('test.readStep', (tx) => stepsSql.getStep(tx, runId, stepId));
  if (!step) throw new Error(`step ${stepId} of run ${runId} is not in the store`);
  return step;
}

export async function readLeases(t: TestEngine, runId: string): Promise<Record<string, unknown>[]> {
  return t.db.store.read('test.readLeases', (tx) => tx.query(`SELECT run_id, execution_seq, holder FROM leases WHERE run_id = $1`, [runId]));
}

export async function readAudit(t: TestEngine, runId: string, eventType: string): Promise<{ data: Record<string, unknown>; ts: number }[]> {
  const rows = await t.db.store.read('test.readAudit', (tx) =>
    tx.query<{ data: string; ts: unknown }>(`SELECT data, ts FROM audit_events WHERE run_id = $1 AND event_type = $2 ORDER BY id`, [runId, eventType]),
  );
  return rows.map((r) => ({ data: JSON.parse(r.data) as Record<string, unknown>, ts: Number(r.ts) }));
}

export async function countRows(t: TestEngine, table: 'events' | 'runs' | 'steps' | 'leases'): Promise<number> {
  const rows = await t.db.store.read('test.count', (tx) => tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${table}`));
  return Number(rows[0].n);
}

/** Everything the store holds about one run: a loser of a race must leave all of it unchanged. */
export async function snapshot(t: TestEngine, runId: string): Promise<{ run: RunRecord; steps: StepRecord[]; leases: Record<string, unknown>[] }> {
  return { run: await readRun(t, runId), steps: await readSteps(t, runId), leases: await readLeases(t, runId) };
}

/** Sum of a counter's values, optionally only those whose labels include `labels`. */
export async function counterValue(counter: Counter<string>, labels: Record<string, string> = {}): Promise<number> {
  const { values } = await counter.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, want]) => (v.labels as Record<string, unknown>)[k] === want))
    .reduce((sum, v) => sum + v.value, 0);
}

/** Outcomes announced by this engine (one per committed terminal write it made). */
export function outcomesAnnounced(engine: Engine, status?: string): Promise<number> {
  return counterValue(engine.resources.metrics.runOutcomes, status ? { status } : {});
}

/** Waits for every follow-up of the engine, then for in-process bus deliveries already scheduled. */
export async function settle(t: TestEngine): Promise<void> {
  expect(await t.engine.resources.followUps.drain(10_000)).toBe(true);
  await new Promise((resolve) => setImmediate(resolve));
}

/** Records every run event (`public.{env}.system.run.{id}.{status}`): unlike RESULTS frames, they carry no msg-id. */
export function recordRunEvents(t: TestEngine): { subjects: string[]; stop: () => void } {
  const subjects: string[] = [];
  // Run-level events only (`public.{env}.system.run.{id}.{status}`); step events have their own tests.
  const sub = t.bus.subscribe('public.>', (m) => {
    if (!m.subject.includes('.step.')) subjects.push(m.subject);
  });
  return { subjects, stop: () => sub.unsubscribe() };
}

/** A step id as the SDK builds it: `<runId>:<name>:<k>` (WIRE-PROTOCOL.md 1.2). */
export function stepId(runId: string, name: string, k = 0): string {
  return `${runId}:${name}:${k}`;
}

/** A completed `step.run` result (WIRE-PROTOCOL.md 1.4). */
export function ranStep(runId: string, name: string, output: unknown) {
  return { id: stepId(runId, name), name, type: 'invoke' as const, status: 'completed' as const, output };
}

/**
 * `n` more scheduler engines on the test's database, with the clocks to move them all. On
 * PostgreSQL each is a fresh node with its own pool (`restart`). On SQLite they share the test's
 * store, as every unit of one process does: better-sqlite3 is synchronous, so two connections in
 * one process would wait out each other's busy timeout with the event loop blocked, and SQLite is
 * single-node anyway. Stopped by `t.close()` (PostgreSQL) or by the returned `stop`.
 */
export async function schedulerPeers(t: TestEngine, n: number): Promise<{ engines: Engine[]; clocks: StoreClock[]; stop: () => Promise<void> }> {
  const peers: Engine[] = [];
  for (let i = 0; i < n; i++) {
    peers.push(t.db.dialect === 'postgres' ? await t.restart() : new Engine({ store: t.db.store, clock: t.db.clock, bus: t.bus }));
  }
  const engines = [t.engine, ...peers];
  return {
    engines,
    clocks: [...new Set(engines.map((e) => e.resources.clock as StoreClock))],
    stop: async () => {
      if (t.db.dialect === 'sqlite') for (const e of peers) await e.stop(1000);
    },
  };
}
