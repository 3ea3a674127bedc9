import { z } from 'zod';
import { EngineError, InvocationError, RUN_ERROR_CODES, RunError, StepResult, YieldInfo } from '@ironflow/contracts';
import { ExecutionFence, ReportKind, judgeReport } from '@ironflow/fencing';
import { Outcome, commitOutcome } from '@ironflow/outcome';
import { FunctionRecord, RunRecord, Tx, correlationsSql, functionsSql, leaseRecoverySql, leasesSql, runsSql, stepsSql, unitWithLockLimit } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { parseDurationMs } from './duration';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';
import { retryDelayMs } from './retry-policy';
import { waitingMatchValue } from './wait-match';
import { dataPathProblem } from './json-path';
import { AcceptedInvoke, InvokeAdmission } from './invoke-admission';
import { checkName, checkPayload, refuseNul, refuseNulAnywhere } from './payload-limits';
import { MAX_TIME_MS, sleepWakeAt, workerAheadAtLeast } from './sleep-clock';
import { announceParked } from './pause-announcer';
import { StepOwner, recordStepRow } from './step-audit';
import { OutcomeGroupCommit } from './outcome-group-commit';
import { stepNameOf } from './step-name';

/**
 * A worker's report of one execution, from any transport. `sentAt`: the worker's clock when it sent
 * the report (ms since the epoch; ours, optional), used to place a sleep on the engine's clock.
 *
 * Or the engine's own verdict on one execution (`byEngine`: a timeout, a stream job dropped or too
 * large to send, a report it refused or an update too large to read): an execution the engine
 * ended is fenced off in the same unit of work, so the worker's late report of it, whatever its
 * kind, is refused with the fencing code (`RUN_NOT_RUNNING` once the run ended, else
 * `STALE_EXECUTION`), not applied and not taken for a repeat.
 */
export type SegmentReport = { steps?: StepResult[]; stepOffset?: number; sentAt?: number; byEngine?: boolean } & (
  | { kind: 'progress' }
  | { kind: 'completed'; output?: unknown }
  | { kind: 'failed'; error: InvocationError }
  | { kind: 'yielded'; yield: YieldInfo }
);

export interface ApplyOptions {
  /** Return an outcome's call only once its audit row landed or was dropped, after its frame (default false). */
  awaitRow?: boolean;
  /**
   * The run's scope and function, when the caller knows them (a push dispatch): a report whose
   * steps the function's cached recording profile would not record skips the read of the run that
   * step rows need.
   */
  owner?: StepOwner;
  /**
   * The report may share its commit with other reports' (`OutcomeGroupCommit`; a push dispatch
   * sets it). Only a fenced report without a holder that ends its run whatever its attempt takes
   * that way: a completion, or a failure that is not retryable (not one the engine made, with its
   * steps' offset given). It writes without reading the run first; a report whose run the group
   * does not commit is applied alone as usual. Default false.
   */
  groupCommit?: boolean;
}

/** What the report did: nothing (a repeat), saved progress, or moved the run. */
export type ReportEffect = 'none' | 'progress' | 'outcome' | 'retry' | 'waiting';

export interface ReportResult {
  effect: ReportEffect;
  run: RunRecord;
}

/** What a retry's audit row records. */
interface RetryRecord {
  failed_attempt: number;
  next_attempt: number;
  delay_ms: number;
  failed_at: number;
  available_at: number;
  error: RunError;
}

const DEFAULT_INVOKE_TIMEOUT_MS = 30_000;

/** What every reported step must be, whatever the transport (WIRE-PROTOCOL.md 1.4). */
const reportedStepsSchema = z.array(
  z.object({ id: z.string().min(1).max(1024), name: z.string().max(1024), status: z.enum(['completed', 'failed']) }).passthrough(),
);

/**
 * Applies worker reports (DESIGN.md "Leases and fencing", "The outcome transaction"): each report is
 * one unit of work that reads the run (locked on PostgreSQL), judges the fence, saves the reported
 * steps and moves the run; a push report that ends its run first tries a group commit with the
 * others arriving at once (`ApplyOptions.groupCommit`, `OutcomeGroupCommit`), and is applied so
 * only when that did not commit it. Throws `EngineError` `STALE_EXECUTION` / `RUN_NOT_RUNNING` (409),
 * `RUN_NOT_FOUND`, `VALIDATION_ERROR` or `PAYLOAD_TOO_LARGE`; a rejected report changes nothing.
 * A lock wait past `lockLimitMs` on PostgreSQL (the run row held by another transaction) rolls the
 * report back and throws `LockTimeoutError` (`UNAVAILABLE`, 503, retryable): the run keeps its
 * execution and lease, so a report sent again lands, and one never sent again is recovered with
 * the lease.
 * A repeated report of a committed outcome answers success and announces nothing. An accepted
 * `step.invoke` commits its child held; the child's admission follows off the report
 * (`InvokeAdmission`), and a repeated invoke report re-admits a child still pending.
 *
 * A run never strands on a report it cannot apply: a fenced terminal report (`completed`,
 * `failed`, `yielded`) refused with `VALIDATION_ERROR` (a bad yield or step, U+0000 in a step id,
 * a value the store cannot hold) or `PAYLOAD_TOO_LARGE` ends the attempt at once, on every
 * transport — it fails with `REPORT_REJECTED` (retryable, the usual retry rules) or
 * `PAYLOAD_TOO_LARGE` (not retryable); a refused `failed` report keeps its own error and
 * retryability, without its steps. The refusal is still thrown to the caller (REST answers it).
 */
export class ReportSystem {
  private readonly group: OutcomeGroupCommit;

  constructor(
    private readonly r: EngineResources,
    private readonly announcer: OutcomeAnnouncer,
    private readonly hints: DispatchHints,
    private readonly admissions: InvokeAdmission,
  ) {
    this.group = new OutcomeGroupCommit(r);
  }

  /**
   * Applies `report` of execution `fence`. `holder`, when given (a REST worker's id), must also
   * hold that execution's lease: a report of a job handed to another worker is `STALE_EXECUTION`
   * even with the right token. `options.awaitRow`: an outcome's call returns once its
   * `run.status_changed` row has landed or been dropped, after its frame (a failed dispatch paces
   * itself so, one row at a time); by default it returns at the commit.
   */
  async apply(runId: string, fence: ExecutionFence | undefined, report: SegmentReport, holder?: string, options: ApplyOptions = {}): Promise<ReportResult> {
    try {
      this.check(report);
      return await this.r.followUps.during(() => this.applyChecked(runId, fence, report, holder, options));
    } catch (err) {
      if (fence && report.kind !== 'progress' && err instanceof EngineError && (err.code === 'VALIDATION_ERROR' || err.code === 'PAYLOAD_TOO_LARGE')) {
        await this.failUnapplied(runId, fence, report, err, holder);
      }
      throw err;
    }
  }

  /**
   * Fails the attempt of a terminal report that could not be applied (see the class comment), as
   * a fenced `failed` report without steps. A fence that no longer holds changes nothing.
   */
  async failUnapplied(runId: string, fence: ExecutionFence, report: SegmentReport, err: EngineError, holder?: string): Promise<void> {
    const tooLarge = err.code === 'PAYLOAD_TOO_LARGE';
    const reason = `${report.kind} report rejected: ${err.message}`.slice(0, 2000);
    const error: InvocationError = report.kind === 'failed'
      ? {
          message: `${String(report.error?.message ?? 'invocation failed').slice(0, 2000)} (${reason}; its steps were not stored)`,
          code: tooLarge ? RUN_ERROR_CODES.PAYLOAD_TOO_LARGE : report.error?.code ?? RUN_ERROR_CODES.REPORT_REJECTED,
          retryable: !tooLarge && report.error?.retryable === true,
        }
      : { message: reason, code: tooLarge ? RUN_ERROR_CODES.PAYLOAD_TOO_LARGE : RUN_ERROR_CODES.REPORT_REJECTED, retryable: !tooLarge };
    this.r.logger.warn('report not applicable; the attempt fails', { run_id: runId, execution_seq: fence.executionSeq, error: err.message });
    try {
      await this.r.followUps.during(() => this.applyChecked(runId, fence, { kind: 'failed', error, byEngine: true }, holder));
    } catch (again) {
      this.r.logger.warn('failure of an unapplicable report not applied', { run_id: runId, execution_seq: fence.executionSeq, error: String(again) });
    }
  }

  private async applyChecked(runId: string, fence: ExecutionFence | undefined, report: SegmentReport, holder?: string, options: ApplyOptions = {}): Promise<ReportResult> {
    if (report.steps?.length && !this.stepRowsSkipped(report, options.owner)) await this.recordSteps(runId, fence, report);
    const grouped = options.groupCommit && fence && holder === undefined ? await this.commitGrouped(runId, fence, report) : null;
    let result: ReportResult & { accepted?: AcceptedInvoke; retry?: RetryRecord };
    try {
      // Its lock waits end at `lockLimitMs` (PostgreSQL): a report on a row held longer changes nothing
      // and is refused `UNAVAILABLE` (retryable); the worker sends it again, or lease recovery runs the segment again.
      result = grouped ? { effect: 'outcome', run: grouped } : await unitWithLockLimit(this.r.store, 'applyReport', this.r.config.lockLimitMs, async (tx) => {
        // A `step.invoke`'s target function is read with the run (one statement on PostgreSQL).
        const invoked = report.kind === 'yielded' ? invokedFunctionId(report.yield) : undefined;
        const withTarget = invoked === undefined ? undefined : await runsSql.getRunWithFunction(tx, runId, { lock: true, functionId: invoked });
        const run = withTarget === undefined ? await runsSql.getRun(tx, runId, { lock: true }) : withTarget?.run ?? null;
        if (!run) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`);
        const verdict = judgeReport(run, fence, report.kind as ReportKind);
        if (verdict.kind === 'reject') throw verdict.error;
        if (verdict.kind === 'duplicate') return { effect: 'none' as const, run };
        if (holder !== undefined && (await leasesSql.leaseHolder(tx, runId, run.executionSeq)) !== holder) {
          throw new EngineError('STALE_EXECUTION', `execution ${run.executionSeq} of run ${runId} is not held by worker ${holder}`, { runId, status: run.status, executionSeq: run.executionSeq });
        }
        await this.r.pausePoints.reached('report.afterRead', runId);
        const liveFence = fence as ExecutionFence;
        if (report.steps?.length) {
          const sequenceStart = report.stepOffset ?? (await stepsSql.nextStepSequence(tx, runId));
          await stepsSql.saveReportedSteps(tx, runId, report.steps, sequenceStart);
        }
        switch (report.kind) {
          case 'progress': {
            await leasesSql.refreshLease(tx, runId, run.executionSeq, tx.now + this.r.config.leaseMs);
            const ahead = workerAheadAtLeast(report.steps, tx.now);
            if (ahead !== undefined) await leasesSql.noteWorkerClock(tx, runId, run.executionSeq, ahead);
            return { effect: 'progress' as const, run };
          }
          case 'completed':
            return this.commit(tx, run, liveFence, { status: 'completed', output: report.output ?? null });
          case 'failed': {
            const failed = await this.fail(tx, run, liveFence, report.error);
            if (report.byEngine) await runsSql.fenceOffExecution(tx, runId, run.executionSeq);
            return failed;
          }
          case 'yielded':
            return this.yieldAt(tx, run, liveFence, report.yield, report, withTarget?.fn);
        }
      });
    } catch (err) {
      if (err instanceof EngineError) this.r.metrics.reportsRejected.inc({ code: err.code });
      throw err;
    }
    // The step events go out just ahead of the outcome's frame and run event (a subscriber to the
    // run's events sees its steps end before the run does), in the same turn, so their publishes
    // share one NATS write.
    this.announceSteps(result.run, result.effect === 'none' ? [] : report.steps ?? []);
    await this.followUp(result, options);
    if (result.effect === 'none' && report.kind === 'yielded' && report.yield?.type?.startsWith('invoke_function')) {
      this.admissions.afterRetriedYield(runId, report.yield.step_id);
    }
    return { effect: result.effect, run: result.run };
  }

  /**
   * A report that ends its run as it stands (see `ApplyOptions.groupCommit`), committed with the
   * other reports waiting: the committed row, or `null` when the report is to be applied alone.
   */
  private async commitGrouped(runId: string, fence: ExecutionFence, report: SegmentReport): Promise<RunRecord | null> {
    if (report.steps?.length && report.stepOffset === undefined) return null;
    let outcome: Outcome;
    if (report.kind === 'completed') outcome = { status: 'completed', output: report.output ?? null };
    else if (report.kind === 'failed' && !report.byEngine && report.error?.retryable !== true) outcome = { status: 'failed', error: toRunError(report.error) };
    else return null;
    return this.group.commit({ runId, fence, outcome, steps: report.steps ?? [], stepOffset: report.stepOffset ?? 0 });
  }

  /** Whether the recorder would write none of the report's step rows (the owner's profile is cached and records no step). */
  private stepRowsSkipped(report: SegmentReport, owner: StepOwner | undefined): boolean {
    if (!owner) return false;
    return (report.steps ?? []).every((step) => this.r.audit.skips(owner.project, owner.env, owner.functionId, `step.${step.status}`));
  }

  /**
   * The rows of a report's steps (`all` profile), one at a time on the reporter's path before the
   * report's unit of work (specification, "Two kinds of row on the way to an outcome"): a stuck
   * table delays the commit, and so the frame and the wake, by up to the audit budget per row,
   * and holds a fast reporter back instead of letting it pass the backlog bound. Written only
   * when the report's fence holds on a read of the run; a report sent again can write its rows
   * twice, and one that then loses a race to another writer still wrote them (best effort).
   */
  private async recordSteps(runId: string, fence: ExecutionFence | undefined, report: SegmentReport): Promise<void> {
    const run = await this.r.store.read('readReportedRun', (tx) => runsSql.getRun(tx, runId));
    if (!run || judgeReport(run, fence, report.kind as ReportKind).kind !== 'apply') return;
    for (const step of report.steps ?? []) await recordStepRow(this.r, run, step, 'report');
  }

  /**
   * After the commit: an outcome is announced off this path; a retry's row stays on the
   * reporter's path (the specification keeps rows of changes that do not end a run there).
   */
  private async followUp(result: ReportResult & { accepted?: AcceptedInvoke; retry?: RetryRecord }, options: ApplyOptions): Promise<void> {
    const { run } = result;
    const announced = result.effect === 'outcome' ? this.announcer.announce(run, 'report', { background: !options.awaitRow }) : undefined;
    if (result.effect === 'retry') this.hints.queued(run.project, run.env, run.mode);
    // A pause was requested while the segment ran: its end parked the run instead of moving it on.
    if (run.status === 'paused') await announceParked(this.r, this.announcer, run, 'report');
    if (result.accepted) this.admissions.afterReport(result.accepted);
    if (result.retry) {
      await this.r.audit.record({
        project: run.project,
        env: run.env,
        runId: run.id,
        functionId: run.functionId,
        eventType: 'run.retry_scheduled',
        cause: result.retry.error.message,
        data: result.retry,
      });
    }
    if (options.awaitRow) await announced;
  }

  private async commit(tx: Tx, run: RunRecord, fence: ExecutionFence, outcome: Parameters<typeof commitOutcome>[2]): Promise<ReportResult> {
    const committed = await commitOutcome(tx, run.id, outcome, { kind: 'execution', fence });
    if (!committed) throw new EngineError('STALE_EXECUTION', `run ${run.id} changed while the report was applied`);
    return { effect: 'outcome', run: committed };
  }

  /** A retryable failure with attempts left re-queues the run after the backoff; otherwise the run fails. */
  private async fail(tx: Tx, run: RunRecord, fence: ExecutionFence, error: InvocationError): Promise<ReportResult & { retry?: RetryRecord }> {
    const runError = toRunError(error);
    if (runError.retryable && run.attempt < run.maxAttempts) {
      const fn = await functionsSql.getFunction(tx, run.project, run.env, run.functionId);
      if (fn) {
        const delayMs = retryDelayMs(fn.definition.retry, run.attempt);
        const availableAt = tx.now + delayMs;
        const status = await runsSql.requeueForRetry(tx, run, availableAt, runError);
        if (!status) throw new EngineError('STALE_EXECUTION', `run ${run.id} changed while the report was applied`);
        await leasesSql.deleteLease(tx, run.id, run.executionSeq);
        await this.segmentEndedNormally(tx, run);
        this.r.metrics.retriesScheduled.inc();
        return {
          effect: 'retry',
          run: { ...run, status, ...(status === 'paused' ? { resumeStatus: 'waiting_for_capacity' as const } : {}), attempt: run.attempt + 1, availableAt },
          retry: { failed_attempt: run.attempt, next_attempt: run.attempt + 1, delay_ms: delayMs, failed_at: tx.now, available_at: availableAt, error: runError },
        };
      }
    }
    return this.commit(tx, run, fence, { status: 'failed', error: runError });
  }

  /** Records the wait a segment ended at and moves the run to `waiting` (or straight back to the queue). */
  /** `invokedFn`: the function a `step.invoke` yield names, read with the run (`undefined`: not read yet; `null`: not registered). */
  private async yieldAt(tx: Tx, run: RunRecord, fence: ExecutionFence, y: YieldInfo, report: SegmentReport, invokedFn?: FunctionRecord | null): Promise<ReportResult & { accepted?: AcceptedInvoke }> {
    if (!y || typeof y !== 'object') throw new EngineError('VALIDATION_ERROR', 'a yielded report needs `yield`');
    if (typeof y.step_id !== 'string' || y.step_id === '') throw new EngineError('VALIDATION_ERROR', 'yield.step_id is required');
    // The wait's step follows the report's steps; a push report knows where they start (its
    // segment's steps are the run's), so only a report without `stepOffset` reads the last one.
    const sequence = report.stepOffset !== undefined ? report.stepOffset + (report.steps?.length ?? 0) : await stepsSql.nextStepSequence(tx, run.id);
    const name = stepNameOf(run.id, y.step_id);
    switch (y.type) {
      case 'sleep': {
        const until = Date.parse(y.until);
        if (Number.isNaN(until)) throw new EngineError('VALIDATION_ERROR', 'yield.until must be an ISO-8601 time');
        // `until` is on the worker's clock: placed on the engine's (sleep-clock.ts).
        const fromSteps = workerAheadAtLeast(report.steps, tx.now);
        const fromCheckpoints = report.sentAt === undefined ? await leasesSql.workerClockOffset(tx, run.id, run.executionSeq) : null;
        const aheadAtLeastMs = Math.max(fromSteps ?? -Infinity, fromCheckpoints ?? -Infinity);
        const wakeAt = sleepWakeAt(until, tx.now, { sentAt: report.sentAt, aheadAtLeastMs: Number.isFinite(aheadAtLeastMs) ? aheadAtLeastMs : null });
        await stepsSql.insertWaitStep(tx, { runId: run.id, stepId: y.step_id, name, type: 'sleep', status: 'waiting', wakeAt, sequence });
        return this.wait(tx, run);
      }
      case 'wait_for_event': {
        const timeoutMs = parseDurationMs(y.event_filter?.timeout ?? '7d');
        if (!y.event_filter?.event || timeoutMs === undefined) throw new EngineError('VALIDATION_ERROR', 'yield.event_filter needs an event and a valid timeout');
        // No match (absent, or null as a JSON body may say it): any event of the name. An empty or malformed path is refused, not taken for none.
        const match: unknown = y.event_filter.match ?? null;
        const matchProblem = match === null ? undefined : typeof match === 'string' ? dataPathProblem(match) : 'a path string, e.g. data.requestId';
        if (matchProblem) throw new EngineError('VALIDATION_ERROR', `yield.event_filter.match: ${matchProblem}`);
        const matchPath = match as string | null;
        const timeoutAt = timeAfter(tx.now, timeoutMs, 'yield.event_filter.timeout');
        await stepsSql.insertWaitStep(tx, { runId: run.id, stepId: y.step_id, name, type: 'wait_for_event', status: 'waiting', timeoutAt, sequence });
        await correlationsSql.insertCorrelation(tx, {
          runId: run.id,
          stepId: y.step_id,
          project: run.project,
          env: run.env,
          eventName: checkName('yield.event_filter.event', y.event_filter.event, 256),
          matchPath,
          matchValue: matchPath !== null ? waitingMatchValue(run.input, matchPath) : null,
        });
        return this.wait(tx, run);
      }
      case 'invoke_function':
      case 'invoke_function_async': {
        const target = invokedFn !== undefined ? invokedFn : await functionsSql.getFunction(tx, run.project, run.env, y.function_id);
        if (!target) {
          return this.commit(tx, run, fence, {
            status: 'failed',
            error: { message: `step ${y.step_id} invokes function ${y.function_id}, which is not registered`, code: 'FUNCTION_NOT_FOUND', retryable: false },
          });
        }
        // Sync or fire-and-forget, the parent waits: a fire-and-forget parent resumes once its child is admitted.
        const timeoutAt = y.type === 'invoke_function' ? timeAfter(tx.now, y.invoke_timeout_ms ?? DEFAULT_INVOKE_TIMEOUT_MS, 'yield.invoke_timeout_ms') : null;
        const accepted = await this.admissions.accept(tx, run, y, target, { name, sequence, timeoutAt });
        return { ...(await this.wait(tx, run)), accepted };
      }
      default:
        throw new EngineError('VALIDATION_ERROR', `yield.type ${(y as { type: string }).type} is not one of sleep, wait_for_event, invoke_function, invoke_function_async`);
    }
  }

  private async wait(tx: Tx, run: RunRecord): Promise<ReportResult> {
    // The execution's lease goes with it.
    const status = await runsSql.markWaiting(tx, run);
    if (!status) throw new EngineError('STALE_EXECUTION', `run ${run.id} changed while the report was applied`);
    await this.segmentEndedNormally(tx, run);
    return { effect: 'waiting', run: { ...run, status, ...(status === 'paused' ? { resumeStatus: 'waiting' as const } : {}) } };
  }

  /**
   * Step events, best effort like run events: one on `public.{env}.system.run.{id}.step.{stepId}.{status}`
   * per step the report saved, off the reporter's path (a lost one is counted and dead-lettered).
   */
  private announceSteps(run: RunRecord, steps: StepResult[]): void {
    if (steps.length === 0) return;
    // All started at once, in order (one connection keeps it), ahead of the outcome's publishes.
    this.r.followUps.track('step-events', async () => {
      await Promise.all(steps.map((step) => this.announcer.publishRunEvent(run, `step.${step.id}.${step.status}`)));
    });
  }

  /** A segment that reported its end breaks a run of lease recoveries: the ceiling counts consecutive ones. */
  private async segmentEndedNormally(tx: Tx, run: RunRecord): Promise<void> {
    if (run.recoveries > 0) await leaseRecoverySql.resetRecoveries(tx, run.id);
  }

  /**
   * Checks a report before anything is written: its size, its steps' shape, and no U+0000 in the
   * strings the store keeps as text (step ids and names, yield fields other than `input`).
   */
  private check(report: SegmentReport): void {
    checkPayload('report', report, this.r.config.maxPayloadBytes);
    const steps = reportedStepsSchema.safeParse(report.steps ?? []);
    if (!steps.success) throw new EngineError('VALIDATION_ERROR', steps.error.issues.map((i) => `steps.${i.path.join('.')}: ${i.message}`).join('; '));
    steps.data.forEach((step, i) => {
      refuseNul(`steps.${i}.id`, step.id);
      refuseNul(`steps.${i}.name`, step.name);
    });
    // Step sequences are INTEGER columns: an offset past them is refused on both stores alike.
    const offset = report.stepOffset;
    if (offset !== undefined && (!Number.isInteger(offset) || offset < 0 || offset + steps.data.length > MAX_STEP_SEQUENCE)) {
      throw new EngineError('VALIDATION_ERROR', `step_offset: an integer from 0 to ${MAX_STEP_SEQUENCE - steps.data.length}`);
    }
    if (report.kind === 'yielded' && report.yield && typeof report.yield === 'object') {
      const { input: _input, ...fields } = report.yield as Record<string, unknown>;
      refuseNulAnywhere('yield', fields);
    }
  }
}

/** A worker's error as the run keeps it: a message always, code and stack only when given. */
function toRunError(error: InvocationError): RunError {
  return {
    message: typeof error?.message === 'string' && error.message !== '' ? error.message : 'invocation failed without an error message',
    ...(typeof error?.code === 'string' && error.code !== '' ? { code: error.code } : {}),
    retryable: error?.retryable === true,
    ...(typeof error?.stack === 'string' && error.stack !== '' ? { stack: error.stack } : {}),
  };
}

/** Largest step sequence (an INTEGER column). */
const MAX_STEP_SEQUENCE = 2_147_483_647;


/** `now + durationMs` for a worker-given duration: a positive finite number whose end the store can hold, else `VALIDATION_ERROR` naming `what`. */
function timeAfter(now: number, durationMs: unknown, what: string): number {
  if (typeof durationMs !== 'number' || !Number.isFinite(durationMs) || durationMs <= 0 || now + durationMs > MAX_TIME_MS) {
    throw new EngineError('VALIDATION_ERROR', `${what}: a positive duration in ms ending before ${new Date(MAX_TIME_MS).toISOString()}`);
  }
  return Math.round(now + durationMs);
}

/** The function id a `step.invoke` yield names, or `undefined` for any other yield (or a malformed one, which `yieldAt` refuses). */
function invokedFunctionId(y: YieldInfo): string | undefined {
  if (!y || typeof y !== 'object' || (y.type !== 'invoke_function' && y.type !== 'invoke_function_async')) return undefined;
  return typeof y.function_id === 'string' ? y.function_id : undefined;
}
