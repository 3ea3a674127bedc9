import {
  CallScope,
  ClientApi,
  EngineError,
  FunctionDefinition,
  ListEventsInput,
  ListEventsOutput,
  ListRunsInput,
  ListRunsOutput,
  RegisterFunctionInput,
  RunResultView,
  RunView,
  TriggerInput,
  TriggerOutput,
  isRunStatus,
  isTerminalRunStatus,
} from '@ironflow/contracts';
import { FunctionRecord, RunRecord, auditSql, eventsSql, runsSql, stepsSql } from '@ironflow/store';
import { CancelSystem } from './cancel-system';
import { PauseSystem } from './pause-system';
import { FunctionRegistry } from './function-registry';
import { EngineResources } from './resources';
import { SyncWaits, drainedError } from './sync-waits';
import { ResultWaiters } from './result-waiters';
import { SyncPoll } from './sync-poll';
import { TriggerSystem } from './trigger-system';
import { refuseNul } from './payload-limits';
import { toEventView, toRunResultView, toRunView, toStepView } from './views';

/** The longest delay `setTimeout` takes (a longer one fires at once): a longer wait wakes and waits again. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The engine's implementation of the client API (WIRE-PROTOCOL.md section 5), transport-free.
 * Reads are scoped to the caller's project and env: a run of another env is `RUN_NOT_FOUND`. An id
 * holding U+0000 is a `VALIDATION_ERROR` on every store.
 */
export class EngineClientApi implements ClientApi {
  /** The sync calls in flight; `Engine.stop` drains them. */
  readonly syncWaits = new SyncWaits();
  /** The RESULTS frames the sync calls wait for (one subscription per project and env); `Engine.stop` closes it. */
  readonly resultWaiters: ResultWaiters;
  /** The sync calls' store poll: one read every `syncPollMs` for all of them. */
  private readonly syncPoll: SyncPoll;

  constructor(
    private readonly r: EngineResources,
    private readonly functions: FunctionRegistry,
    private readonly triggers: TriggerSystem,
    private readonly cancels: CancelSystem,
    private readonly pauses: PauseSystem,
  ) {
    this.resultWaiters = new ResultWaiters(r.bus);
    this.syncPoll = new SyncPoll(r.store, r.config.syncPollMs);
  }

  async registerFunction(scope: CallScope, input: RegisterFunctionInput) {
    const { record, created } = await this.functions.register(scope, input);
    return { function: withVersion(record), created };
  }

  async listFunctions(scope: CallScope) {
    return (await this.functions.list(scope)).map(withVersion);
  }

  /**
   * Stores the event and starts its runs. Throws `UNAVAILABLE` (a `LockTimeoutError`, retryable:
   * nothing was stored) when a lock it needs, such as an open wait's correlation row, stays held
   * past `lockLimitMs` (1 s) on PostgreSQL.
   */
  trigger(scope: CallScope, input: TriggerInput): Promise<TriggerOutput> {
    return this.triggers.trigger(scope, input);
  }

  /** Starts the event's runs and waits for their outcomes (see `startAndWait`). */
  async triggerSync(scope: CallScope, input: TriggerInput & { timeoutMs?: number }): Promise<{ eventId: string; results: RunResultView[] }> {
    let eventId = '';
    const results = await this.startAndWait(scope, input.timeoutMs, async () => {
      const started = await this.triggers.trigger(scope, input, { sync: true });
      eventId = started.eventId;
      return started.runIds;
    }, () => eventId);
    return { eventId, results };
  }

  async invokeFunctionSync(scope: CallScope, input: { functionId: string; input: unknown; timeoutMs?: number }): Promise<RunResultView> {
    if (typeof input.functionId !== 'string' || input.functionId === '') throw new EngineError('VALIDATION_ERROR', 'functionId: a function id is required');
    refuseNul('functionId', input.functionId);
    const [result] = await this.startAndWait(scope, input.timeoutMs, async () => [(await this.triggers.invoke(scope, input.functionId, input.input)).id]);
    return result;
  }

  /**
   * Starts runs with `start` and waits for their outcomes: it listens for their RESULTS frames
   * (through the process's shared subscription, {@link ResultWaiters}) and has the process's store
   * poll read the ones that ended ({@link SyncPoll}: one read every `syncPollMs`, 100 ms, for all
   * the calls waiting, from 100–200 ms after the call began), so a lost frame costs latency, never
   * the result. A frame is the committed outcome (the announcer publishes it from the committed
   * row), as is a run the poll found ended: once every run ended the call answers with them. A
   * failed poll fails the call. At the deadline (`timeoutMs`, default 30000) it reads its runs and
   * answers with each as it stands. During a drain ({@link SyncWaits}) a new call is refused with
   * `UNAVAILABLE` before starting anything, and a call whose runs are still going at the drain
   * deadline throws `UNAVAILABLE` naming them.
   */
  private async startAndWait(scope: CallScope, timeoutMs: number | undefined, start: () => Promise<string[]>, eventIdOf: () => string = () => ''): Promise<RunResultView[]> {
    let wake: (() => void) | undefined;
    const end = this.syncWaits.begin(() => wake?.());
    const deadline = Date.now() + (timeoutMs && timeoutMs > 0 ? timeoutMs : this.r.config.syncDefaultTimeoutMs);
    const ended = new Map<string, RunResultView>();
    let failure: { err: unknown } | undefined;
    const listener = this.resultWaiters.listen(scope.project, scope.env, (frame) => {
      const view = frame as RunResultView | null;
      if (!view || typeof view.runId !== 'string' || !isTerminalRunStatus(view.status)) return;
      ended.set(view.runId, view);
      wake?.();
    });
    let unwatch: (() => void) | undefined;
    try {
      const runIds = await start();
      if (runIds.length === 0) return [];
      listener.watch(runIds);
      unwatch = this.syncPoll.watch(
        runIds,
        (runs) => {
          for (const run of runs) if (!ended.has(run.id)) ended.set(run.id, toRunResultView(run));
          wake?.();
        },
        (err) => {
          failure = { err };
          wake?.();
        },
      );
      for (;;) {
        if (runIds.every((id) => ended.has(id))) return runIds.map((id) => ended.get(id)!);
        if (failure) throw failure.err;
        const now = Date.now();
        // The drain deadline is its timer having run, which may be while `now` still reads before
        // it, or while this call was starting its runs (no wake to hear): see `deadlinePassed`.
        if (now >= deadline || this.syncWaits.deadlinePassed) {
          const runs = await this.r.store.read('readSyncRuns', (tx) => runsSql.getRuns(tx, runIds));
          if (now >= deadline || runs.every((run) => isTerminalRunStatus(run.status))) {
            const byId = new Map(runs.map((run) => [run.id, run]));
            return runIds.map((id) => byId.get(id)).filter((run): run is RunRecord => !!run).map(toRunResultView);
          }
          throw drainedError(runs.filter((run) => !isTerminalRunStatus(run.status)), eventIdOf());
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(deadline - now, MAX_TIMER_MS));
          function done() { clearTimeout(timer); wake = undefined; resolve(); }
          wake = done;
        });
      }
    } finally {
      unwatch?.();
      listener.close();
      end();
    }
  }

  async getRun(scope: CallScope, id: string): Promise<RunView> {
    return toRunView(await this.mustRead(scope, id));
  }

  async listRuns(scope: CallScope, input: ListRunsInput): Promise<ListRunsOutput> {
    if (input.status !== undefined && !isRunStatus(input.status)) throw new EngineError('VALIDATION_ERROR', `status ${JSON.stringify(input.status)} is not a run status`);
    refuseNul('functionId', input.functionId);
    refuseNul('cursor', input.cursor);
    const limit = pageSize(input.limit);
    const cursor = decodeCursor(input.cursor);
    const { runs, total } = await this.r.store.read('listRuns', (tx) =>
      runsSql.listRuns(tx, scope.project, scope.env, { functionId: input.functionId || undefined, status: input.status, limit, cursor }),
    );
    const last = runs[runs.length - 1];
    return { runs: runs.map(toRunView), nextCursor: runs.length === limit && last ? `${last.createdAt}:${last.id}` : '', totalCount: total };
  }

  /**
   * Lists the event log, newest first (REST `GET /api/v1/events`; not a Connect RPC). Throws
   * `VALIDATION_ERROR` for a cursor this API did not return, and for U+0000 in `name` or `cursor`
   * (as every route refuses it).
   */
  async listEvents(scope: CallScope, input: ListEventsInput): Promise<ListEventsOutput> {
    refuseNul('name', input.name);
    refuseNul('cursor', input.cursor);
    const limit = pageSize(input.limit);
    const cursor = decodeCursor(input.cursor);
    const events = await this.r.store.read('listEvents', (tx) =>
      eventsSql.listEvents(tx, scope.project, scope.env, { name: input.name || undefined, limit, cursor: cursor && { ts: cursor.createdAt, id: cursor.id } }),
    );
    const last = events[events.length - 1];
    return { events: events.map(toEventView), nextCursor: events.length === limit && last ? `${last.ts}:${last.id}` : '' };
  }

  async getRunSteps(scope: CallScope, id: string) {
    await this.mustRead(scope, id);
    // The audit rows come through their own small pool: a locked `audit_events` holds none of the engine's connections.
    const [rest, history] = await Promise.all([
      this.r.store.read('getRunSteps', async (tx) => ({
        steps: (await stepsSql.listSteps(tx, id)).map(toStepView),
        children: (await runsSql.listChildRuns(tx, id)).map(toRunView),
      })),
      this.r.auditReads.read('listAudit', (tx) => auditSql.listAudit(tx, id)),
    ]);
    return {
      steps: rest.steps,
      history: history.map((a) => ({ eventType: a.eventType, ...(a.cause ? { cause: a.cause } : {}), ...(a.data !== null ? { data: a.data } : {}), ts: new Date(a.ts).toISOString() })),
      children: rest.children,
    };
  }

  /**
   * Cancels a run that has not ended (an ended run is returned as it is). Throws `RUN_NOT_FOUND`,
   * or `UNAVAILABLE` (a `LockTimeoutError`, retryable: nothing changed) when the run's row stays
   * locked past `lockLimitMs` (1 s) on PostgreSQL.
   */
  async cancelRun(scope: CallScope, id: string, reason: string): Promise<RunView> {
    refuseNul('id', id);
    return toRunView(await this.cancels.cancel(scope, id, reason));
  }

  async pauseRun(scope: CallScope, id: string, reason?: string) {
    const { status, run } = await this.pauses.pause(scope, id, reason);
    return { status, run: toRunView(run) };
  }

  async resumeRun(scope: CallScope, id: string, fromStep?: string): Promise<RunView> {
    return toRunView(await this.pauses.resume(scope, id, fromStep));
  }

  getPausedState(scope: CallScope, id: string) {
    return this.pauses.pausedState(scope, id);
  }

  injectStepOutput(scope: CallScope, input: { runId: string; stepId: string; output: unknown; reason?: string }) {
    return this.pauses.injectStepOutput(scope, input);
  }

  private async mustRead(scope: CallScope, id: string): Promise<RunRecord> {
    if (typeof id !== 'string' || id === '') throw new EngineError('VALIDATION_ERROR', 'id: a run id is required');
    refuseNul('id', id);
    const run = await this.r.store.read('getRun', (tx) => runsSql.getRunInScope(tx, scope.project, scope.env, id));
    if (!run) throw new EngineError('RUN_NOT_FOUND', `run ${id} does not exist`);
    return run;
  }
}

function withVersion(record: FunctionRecord): FunctionDefinition & { version: number } {
  return { ...record.definition, version: record.version };
}

/** A page size: `limit` within 1–500, default 50. */
function pageSize(limit: number | undefined): number {
  return Math.min(Math.max(limit && limit > 0 ? limit : 50, 1), 500);
}

function decodeCursor(cursor: string | undefined): { createdAt: number; id: string } | undefined {
  if (!cursor) return undefined;
  const cut = cursor.indexOf(':');
  const createdAt = Number(cursor.slice(0, cut));
  if (cut <= 0 || !Number.isFinite(createdAt)) throw new EngineError('VALIDATION_ERROR', 'cursor: not a cursor this API returned');
  return { createdAt, id: cursor.slice(cut + 1) };
}
