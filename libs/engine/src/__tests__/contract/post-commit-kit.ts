import { subjects } from '@ironflow/bus';
import { CallScope, JobAssignment } from '@ironflow/contracts';
import { Engine } from '@ironflow/engine';
import { RunRecord, StepRecord, runsSql, stepsSql } from '@ironflow/store';
import { Locker, TestEngine, TestStore, openLocker, waitFor, waitForAdmission } from '@ironflow/testing';

/** Functions of the post-commit contract tests: a parent that invokes a pull child. */
export async function registerParentAndChild(t: TestEngine, parentMode: 'push' | 'pull', engine: Engine = t.engine): Promise<void> {
  await engine.api.registerFunction(t.scope, { id: 'parent', mode: parentMode, ...(parentMode === 'push' ? { endpointUrl: 'http://127.0.0.1:9/never-called' } : {}), triggers: [{ event: 'go' }] });
  await engine.api.registerFunction(t.scope, { id: 'child', mode: 'pull', retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
  await engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['child', 'parent'] });
}

export interface ParentWaiting {
  parentId: string;
  childId: string;
  stepId: string;
}

/** Triggers the parent and drives its first segment to a sync invoke of `child`, and waits for the child's admission. */
export async function parentWaitingOnChild(t: TestEngine, parentMode: 'push' | 'pull', engine: Engine = t.engine, scope: CallScope = t.scope): Promise<ParentWaiting> {
  const { runIds } = await engine.api.trigger(scope, { event: 'go', data: { order: 7 } });
  const parentId = runIds[0];
  const stepId = `${parentId}:child:0`;
  const y = { kind: 'yielded' as const, yield: { type: 'invoke_function' as const, step_id: stepId, function_id: 'child', input: { n: 1 } } };
  if (parentMode === 'push') {
    const [segment] = await engine.dispatch.claim({ mode: 'push', limit: 1, project: scope.project, env: scope.env }, 'node-a');
    await engine.reports.apply(parentId, { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! }, y);
  } else {
    const job = await pollOne(engine, parentId);
    await engine.pull.update('w1', job.job_id, { status: 'yielded', yield: y.yield, execution_seq: job.execution_seq, lease_token: job.lease_token });
  }
  const step = await readStep(t, parentId, stepId);
  await waitForAdmission(t, step!.childRunId!);
  return { parentId, childId: step!.childRunId!, stepId };
}

/**
 * `n` push parents (of `registerParentAndChild`, registered here), each waiting on a child that
 * worker w1 has polled, with their follow-ups drained: the arrange of a burst of child outcomes.
 */
export async function parentsWithPolledChildren(t: TestEngine, n: number): Promise<{ waits: ParentWaiting[]; jobs: JobAssignment[] }> {
  await registerParentAndChild(t, 'push');
  const waits: ParentWaiting[] = [];
  for (let i = 0; i < n; i += 1) waits.push(await parentWaitingOnChild(t, 'push'));
  const jobs: JobAssignment[] = [];
  await waitFor('every child polled', async () => {
    jobs.push(...(await t.engine.pull.poll('w1', n - jobs.length)));
    return jobs.length === n || undefined;
  });
  await t.engine.resources.followUps.drain(5000);
  return { waits, jobs };
}

/** Polls as worker `w1` until the job of `runId` arrives (other jobs are not expected). */
export async function pollOne(engine: Engine, runId: string): Promise<JobAssignment> {
  const jobs = await engine.pull.poll('w1', 1);
  const job = jobs.find((j) => j.run_id === runId);
  if (!job) throw new Error(`expected the job of ${runId}, polled ${JSON.stringify(jobs.map((j) => j.run_id))}`);
  return job;
}

/** Ends the child: completed with `{charged: 42}`, failed non-retryably, or cancelled by a user. */
export async function endChild(engine: Engine, scope: CallScope, childId: string, how: 'completed' | 'failed' | 'cancelled'): Promise<void> {
  if (how === 'cancelled') {
    await engine.api.cancelRun(scope, childId, 'user cancelled the child');
    return;
  }
  const job = await pollOne(engine, childId);
  const fence = { execution_seq: job.execution_seq, lease_token: job.lease_token };
  if (how === 'completed') await engine.pull.update('w1', job.job_id, { status: 'completed', output: { charged: 42 }, ...fence });
  else await engine.pull.update('w1', job.job_id, { status: 'failed', error: { message: 'card declined', retryable: false }, ...fence });
}

export function readRun(t: TestEngine, id: string): Promise<RunRecord | null> {
  return t.db.store.read('test', (tx) => runsSql.getRun(tx, id));
}

export function readStep(t: TestEngine, runId: string, stepId: string): Promise<StepRecord | null> {
  return t.db.store.read('test', (tx) => stepsSql.getStep(tx, runId, stepId));
}

export async function auditRows(t: TestEngine, runId: string, eventType: string): Promise<number> {
  const rows = await t.db.store.read('test', (tx) => tx.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM audit_events WHERE run_id = $1 AND event_type = $2`, [runId, eventType]));
  return Number(rows[0].n);
}

/** A metric's current value (summed over labels matching `labels`). */
export async function metricValue(engine: Engine, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = engine.resources.metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, val]) => (v.labels as Record<string, unknown>)[k] === val))
    .filter((v) => !('metricName' in v) || !String((v as { metricName?: string }).metricName).endsWith('_bucket'))
    .reduce((sum, v) => sum + v.value, 0);
}

/** Collects the RESULTS frames published for `runId` (message data, in arrival order) until `stop`. */
export function watchFrames(t: TestEngine, runId: string): { seen: unknown[]; stop: () => void } {
  const seen: unknown[] = [];
  const sub = t.bus.subscribe(subjects.result(t.scope.project, t.scope.env, runId), (m) => seen.push(m.data));
  return { seen, stop: () => sub.unsubscribe() };
}

/** `ironflow_audit_write_failures_total` (audit rows given up and counted), for one `event_type` or all. */
export function auditWriteFailures(t: TestEngine, eventType?: string): Promise<number> {
  return metricValue(t.engine, 'ironflow_audit_write_failures_total', eventType ? { event_type: eventType } : {});
}

/** Real locks from a second PostgreSQL connection for a contract test (see {@link testLocker}). */
export type TestLocks = Pick<Locker, 'lockTable' | 'waiters' | 'release'> & {
  /** Runs `sql` (e.g. `SELECT … FOR UPDATE`) in the locker's transaction. */
  lock(sql: string, params?: unknown[]): Promise<void>;
};

/**
 * A locker (`openLocker`) on the store `db()` returns, opened at its first use. `release` rolls
 * the locks back and closes it (nothing when none is open); a suite calls it in its `afterEach`
 * before it closes the engine (a store cannot be dropped under locks).
 */
export function testLocker(db: () => TestStore): TestLocks {
  let locker: Locker | undefined;
  const open = async () => (locker ??= await openLocker(db()));
  return {
    lock: async (sql, params = []) => (await open()).lockRows(sql, params),
    lockTable: async (table, mode) => (await open()).lockTable(table, mode),
    waiters: async () => (await open()).waiters(),
    release: async () => {
      await locker?.close();
      locker = undefined;
    },
  };
}

/**
 * Opens an engine (`open`) before each test of the suite and hands it to `use`; closes it after
 * the test, with its audit sink unblocked first so rows a test left blocked do not hold the close,
 * and `locks` (when given) released before that.
 */
export function engineForEachTest(open: () => Promise<TestEngine>, use: (t: TestEngine) => void, locks?: TestLocks): void {
  let t: TestEngine | undefined;
  beforeEach(async () => {
    t = await open();
    use(t);
  });
  afterEach(async () => {
    await locks?.release();
    t?.audit.unblock();
    await t?.close();
    t = undefined;
  });
}
