import { CallScope, EngineError, PauseStatus, PausedStateView, isTerminalRunStatus } from '@ironflow/contracts';
import { RunRecord, StepRecord, Tx, pausesSql, runsSql, stepsSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { OutcomeAnnouncer } from './outcome-announcer';
import { announceParked } from './pause-announcer';
import { checkName, checkPayload } from './payload-limits';
import { stepNameOf } from './step-name';
import { EngineResources } from './resources';

const MAX_REASON_CHARS = 1024;

/**
 * Pause, resume and step injection (WIRE-PROTOCOL.md 5.2 `PauseRun`, `GetPausedState`,
 * `InjectStepOutput`; 5.6 `POST /api/v1/runs/resume`). A run parks at its next segment boundary:
 * a queued or waiting run at once, a running one when its segment's report arrives (the report
 * moves it to `paused` instead of queueing its next segment or marking it waiting). A paused run
 * holds no lease, is never claimed and never recovered; its wait keeps its clock (a sleep that
 * comes due, an event that arrives, a child that ends are kept for the resume; a wait that fails
 * still fails the run). Each call is one unit of work that reads the run locked and writes with
 * the state it read in the WHERE clause; its audit row (`run.paused`, `run.pause_requested`,
 * `run.resumed`, `run.step_injected`) is written before the call returns.
 */
export class PauseSystem {
  constructor(
    private readonly r: EngineResources,
    private readonly announcer: OutcomeAnnouncer,
    private readonly hints: DispatchHints,
  ) {}

  async pause(scope: CallScope, runId: string, reason?: string): Promise<{ status: PauseStatus; run: RunRecord }> {
    requireRunId(runId);
    const why = reason === undefined || reason === '' ? null : checkName('reason', reason, MAX_REASON_CHARS);
    const result = await this.r.store.unitOfWork('pauseRun', async (tx) => {
      const run = await readLocked(tx, scope, runId);
      if (isTerminalRunStatus(run.status)) throw new EngineError('RUN_NOT_RUNNING', `run ${runId} is ${run.status}; an ended run cannot be paused`);
      if (run.status === 'paused') return { run, changed: false };
      return { run: mustWrite(await pausesSql.requestPause(tx, run, why), runId), changed: true };
    });
    const status: PauseStatus = result.run.status === 'paused' ? 'paused' : 'pause_requested';
    if (result.changed && status === 'paused') await announceParked(this.r, this.announcer, result.run, 'operator');
    if (result.changed && status === 'pause_requested') await this.audit(result.run, 'run.pause_requested', { ...(why ? { reason: why } : {}) });
    return { status, run: result.run };
  }

  async resume(scope: CallScope, runId: string, fromStep?: string): Promise<RunRecord> {
    requireRunId(runId);
    if (fromStep) throw new EngineError('VALIDATION_ERROR', 'from_step: resuming from a step is not supported by this engine; resume a paused run without it');
    const result = await this.r.store.unitOfWork('resumeRun', async (tx) => {
      const run = await readLocked(tx, scope, runId);
      if (isTerminalRunStatus(run.status)) {
        throw new EngineError('RUN_NOT_RUNNING', `run ${runId} is ${run.status}; only a paused run can be resumed (resuming an ended run is not supported by this engine)`);
      }
      if (run.status !== 'paused' && !run.pauseRequested) return { run, before: run, changed: false };
      return { run: mustWrite(await pausesSql.resume(tx, run), runId), before: run, changed: true };
    });
    if (!result.changed) return result.run;
    const run = result.run;
    if (run.status === 'waiting_for_capacity') this.hints.queued(run.project, run.env, run.mode);
    await this.announcer.publishRunEvent(run, 'resumed');
    await this.audit(run, 'run.resumed', { from: result.before.status, to: run.status });
    return run;
  }

  async pausedState(scope: CallScope, runId: string): Promise<PausedStateView> {
    requireRunId(runId);
    return this.r.store.read('getPausedState', async (tx) => {
      const run = await runsSql.getRunInScope(tx, scope.project, scope.env, runId);
      if (!run) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`);
      if (run.status !== 'paused') throw notPaused(run);
      const steps = await stepsSql.listSteps(tx, runId);
      const open = steps.find((s) => s.status === 'waiting');
      return {
        steps: steps.filter((s) => s.status !== 'waiting').map(toPausedStep),
        nextStepHint: open?.name ?? '',
        pauseReason: run.pauseReason ?? '',
      };
    });
  }

  async injectStepOutput(scope: CallScope, input: { runId: string; stepId: string; output: unknown; reason?: string }): Promise<{ stepId: string; previousOutput?: unknown }> {
    const { runId, stepId } = input;
    requireRunId(runId);
    if (typeof stepId !== 'string' || stepId === '') throw new EngineError('VALIDATION_ERROR', 'step_id: a step id is required');
    if (!stepId.startsWith(`${runId}:`)) throw new EngineError('VALIDATION_ERROR', `step_id: ${JSON.stringify(stepId)} is not a step of run ${runId} (step ids are "<runId>:<name>:<n>")`);
    const reason = input.reason ? checkName('reason', input.reason, MAX_REASON_CHARS) : undefined;
    checkPayload('new_output', input.output, this.r.config.maxPayloadBytes);
    const result = await this.r.store.unitOfWork('injectStepOutput', async (tx) => {
      const run = await readLocked(tx, scope, runId);
      if (run.status !== 'paused') throw notPaused(run);
      const existing = await stepsSql.getStep(tx, runId, stepId);
      if (existing?.status === 'waiting') {
        throw new EngineError('VALIDATION_ERROR', `step ${stepId} is the wait the run parked at; only an ended step or one the run has not reached can be injected`);
      }
      const sequence = existing ? existing.sequence : await stepsSql.nextStepSequence(tx, runId);
      const written = await pausesSql.injectStepOutput(tx, { runId, stepId, name: existing?.name ?? stepNameOf(runId, stepId), output: input.output, sequence });
      if (!written) throw new Error(`step ${stepId} of paused run ${runId} was not written`);
      return { run, existing };
    });
    await this.audit(result.run, 'run.step_injected', {
      step_id: stepId,
      previous_status: result.existing?.status ?? null,
      ...(reason ? { reason } : {}),
    });
    return { stepId, ...(result.existing?.status === 'completed' && result.existing.output !== undefined ? { previousOutput: result.existing.output } : {}) };
  }

  private async audit(run: RunRecord, eventType: string, data: Record<string, unknown>): Promise<void> {
    await this.r.audit.record({ project: run.project, env: run.env, runId: run.id, functionId: run.functionId, eventType, cause: 'operator', data });
  }
}

function requireRunId(runId: unknown): void {
  if (typeof runId !== 'string' || runId === '') throw new EngineError('VALIDATION_ERROR', 'run_id: a run id is required');
}

async function readLocked(tx: Tx, scope: CallScope, runId: string): Promise<RunRecord> {
  const run = await runsSql.getRun(tx, runId, { lock: true });
  if (!run || run.project !== scope.project || run.env !== scope.env) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`);
  return run;
}

/** The run is read locked (one unit at a time on SQLite), so its guarded write cannot miss. */
function mustWrite(run: RunRecord | null, runId: string): RunRecord {
  if (!run) throw new Error(`run ${runId} changed under its lock`);
  return run;
}

function notPaused(run: RunRecord): EngineError {
  const detail = run.pauseRequested ? '; a pause is requested and its segment is still running' : '';
  return new EngineError('RUN_NOT_PAUSED', `run ${run.id} is ${run.status}, not paused${detail}`, { status: run.status, pauseRequested: run.pauseRequested });
}

function toPausedStep(step: StepRecord) {
  return {
    id: step.stepId,
    name: step.name,
    type: step.type,
    status: step.status,
    ...(step.status === 'completed' && step.output !== undefined ? { output: step.output } : {}),
    injected: step.injected,
    ...(step.endedAt !== null ? { completedAt: new Date(step.endedAt).toISOString() } : {}),
  };
}
