import { CallScope } from '@ironflow/contracts';
import { Engine, SegmentReport } from '@ironflow/engine';
import { ExecutionFence } from '@ironflow/fencing';
import { FollowUpTracker } from '@ironflow/follow-up';
import { Dialect, invokesSql } from '@ironflow/store';
import { TestEngine, auditOf, openTestEngine, waitFor } from '@ironflow/testing';
import { readRun, readStep } from './post-commit-kit';

/**
 * Functions and drivers of the `cancel_on` and invoke-admission contract tests: a push parent
 * (never called: its segments are claimed and reported by hand) triggered by `go`, and a pull
 * child that `order.cancelled` cancels by `data.orderId`.
 */
export const CHILD_CANCEL_ON = [{ event: 'order.cancelled', match: 'data.orderId' }];

/**
 * The engine config of these tests: a short follow-up drain, passes that take a run at once, and
 * an audit budget long enough that a row these tests hold is held, not dropped, however slow a
 * loaded machine makes its recording lookup (a test releases it long before).
 */
export const ADMISSION_TEST_CONFIG = { followUpDrainMs: 1000, admissionGraceMs: 0, auditBudgetMs: 30_000 };

/** An engine on `dialect` with real NATS, the functions below registered. */
export async function openAdmissionTest(dialect: Dialect, followUps?: FollowUpTracker): Promise<TestEngine> {
  const t = await openTestEngine(dialect, ADMISSION_TEST_CONFIG, { bus: 'nats', followUps });
  await registerInvokeFunctions(t);
  return t;
}

/** Waits for every follow-up of `engine` (admissions, announces, wakes). */
export function drainFollowUps(engine: Engine): Promise<boolean> {
  return engine.resources.followUps.drain(15_000);
}

export async function registerInvokeFunctions(t: TestEngine, engine: Engine = t.engine): Promise<void> {
  await engine.api.registerFunction(t.scope, { id: 'parent', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called', triggers: [{ event: 'go' }] });
  await engine.api.registerFunction(t.scope, { id: 'child', mode: 'pull', cancelOn: CHILD_CANCEL_ON, retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
  await engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['child'] });
}

export interface ReportedInvoke {
  parentId: string;
  childId: string;
  stepId: string;
  /** Sends the same invoke report again (a worker retrying after a lost answer), through `engine`. */
  resend(engine: Engine): Promise<unknown>;
}

/**
 * Triggers the parent (event `trigger`, default `go`), claims its segment and applies its report of a
 * `step.invoke` of `functionId` (default `child`) with input `{orderId}` (fire-and-forget with
 * `async`). `beforeReport` runs between the claim and the report (a freeze). Does not wait for the child's admission.
 */
export async function reportInvoke(
  t: TestEngine,
  orderId: string,
  options: { async?: boolean; engine?: Engine; scope?: CallScope; functionId?: string; trigger?: string; beforeReport?: () => Promise<unknown> } = {},
): Promise<ReportedInvoke> {
  const engine = options.engine ?? t.engine;
  const scope = options.scope ?? t.scope;
  const functionId = options.functionId ?? 'child';
  const { runIds } = await engine.api.trigger(scope, { event: options.trigger ?? 'go', data: { orderId } });
  const parentId = runIds[0];
  const [segment] = await engine.dispatch.claim({ mode: 'push', limit: 1, project: scope.project, env: scope.env }, 'node-a');
  if (segment?.run.id !== parentId) throw new Error(`expected to claim ${parentId}, claimed ${segment?.run.id}`);
  const fence: ExecutionFence = { executionSeq: segment.run.executionSeq, leaseToken: segment.run.leaseToken! };
  const stepId = `${parentId}:${functionId}:0`;
  const report: SegmentReport = {
    kind: 'yielded',
    yield: options.async
      ? { type: 'invoke_function_async', step_id: stepId, function_id: functionId, input: { orderId } }
      : { type: 'invoke_function', step_id: stepId, function_id: functionId, input: { orderId }, invoke_timeout_ms: 600_000 },
  };
  await options.beforeReport?.();
  await engine.reports.apply(parentId, fence, report);
  const step = await readStep(t, parentId, stepId);
  return { parentId, childId: step!.childRunId!, stepId, resend: (e) => e.reports.apply(parentId, fence, report) };
}

/** Emits `order.cancelled {orderId}` through `engine`. Returns the event id. */
export async function emitCancel(t: TestEngine, orderId: string, engine: Engine = t.engine): Promise<string> {
  return (await engine.api.trigger(t.scope, { event: 'order.cancelled', data: { orderId } })).eventId;
}

/** A run's audit rows in the order `ironflow run get` shows them (by time, then insertion). */
export async function history(t: TestEngine, runId: string): Promise<{ id: number; eventType: string; cause: string | null; ts: number }[]> {
  const rows = await t.db.store.read('test.history', (tx) =>
    tx.query<{ id: unknown; event_type: string; cause: string | null; ts: unknown }>(`SELECT id, event_type, cause, ts FROM audit_events WHERE run_id = $1 ORDER BY ts, id`, [runId]),
  );
  return rows.map((r) => ({ id: Number(r.id), eventType: r.event_type, cause: r.cause, ts: Number(r.ts) }));
}

/**
 * Every audit insert of `engine` held until `release()` (a stuck `audit_events` table), through
 * its `BlockingAuditSink`; `reached()` resolves once a write waits on it.
 */
export function holdAudit(engine: Engine): { reached: () => Promise<unknown>; release: () => void } {
  const sink = auditOf(engine);
  sink.block();
  return { reached: () => waitFor('an audit write held', () => sink.waiting > 0), release: () => sink.unblock() };
}

/**
 * How long a test that holds a new child's `run.created` row watches it stay held, ms. An
 * admission that does not wait for its row replays and cancels the child within about 20 ms here
 * (measured on both stores), so ten times that.
 */
export const HELD_ROW_WINDOW_MS = 200;

/**
 * A window, not a hope: the claim is that nothing happens to `childId` while its `run.created`
 * row is held (an admission may not replay before the row lands), and a claim that something does
 * not happen needs time for it to happen. Watches {@link HELD_ROW_WINDOW_MS}, which must be well
 * inside `allowedWaitMs`, the configured wait after which the admission may go on without the
 * row; then asserts the child still held and queued.
 */
export async function expectHeldWhileRowHeld(t: TestEngine, childId: string, allowedWaitMs: number): Promise<void> {
  if (allowedWaitMs < 10 * HELD_ROW_WINDOW_MS) throw new Error(`the admission may go on after ${allowedWaitMs} ms: too close to the ${HELD_ROW_WINDOW_MS} ms window to prove it waited`);
  await new Promise((resolve) => setTimeout(resolve, HELD_ROW_WINDOW_MS));
  expect(await readRun(t, childId)).toMatchObject({ status: 'waiting_for_capacity', held: true });
}

/** Takes every free slot of `engine`'s follow-up slot set; returns their release. */
export async function takeAllSlots(engine: Engine): Promise<() => void> {
  const held: (() => void)[] = [];
  for (let release = await engine.resources.wakeSlots.tryAcquire(); release; release = await engine.resources.wakeSlots.tryAcquire()) held.push(release);
  return () => held.forEach((release) => release());
}

/** Whether `childId` was released to the queue and never claimed. */
export async function dispatchedUnclaimed(t: TestEngine, childId: string): Promise<boolean> {
  const run = await readRun(t, childId);
  return !!run && run.status === 'waiting_for_capacity' && !run.held && run.executionSeq === 0;
}

/** Whether `childId` ended cancelled without ever being claimed. */
export async function cancelledUnclaimed(t: TestEngine, childId: string): Promise<boolean> {
  const run = await readRun(t, childId);
  return !!run && run.status === 'cancelled' && run.executionSeq === 0 && run.startedAt === null;
}

/** The pending invocation of a parent's step, as stored. */
export async function invocation(t: TestEngine, parentId: string, stepId: string) {
  return t.db.store.read('test.invoke', (tx) => invokesSql.getInvoke(tx, parentId, stepId));
}
