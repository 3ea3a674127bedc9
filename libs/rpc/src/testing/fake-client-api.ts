/**
 * A small in-memory `ClientApi` for the transport tests of this lib. It keeps functions and runs
 * in maps, starts one run per function whose trigger names the event, and records every call
 * (with its scope) so tests can assert what the transport parsed.
 *
 * Behaviour hooks through event data: `{ fail: true }` → the run fails; `{ output: <v> }` → the
 * run completes with `<v>` as output; otherwise it stays `waiting_for_capacity` (attempt 0).
 */
import {
  type CallScope,
  type ClientApi,
  DEFAULT_FUNCTION_TIMEOUT_MS,
  DEFAULT_RETRY,
  EngineError,
  type FunctionDefinition,
  type ListRunsInput,
  type RegisterFunctionInput,
  type RunResultView,
  type RunView,
  type StepView,
  type TriggerInput,
  isTerminalRunStatus,
} from '@ironflow/contracts';

export interface RecordedCall {
  method: string;
  scope: CallScope;
  input: unknown;
}

type StoredFunction = FunctionDefinition & { version: number };

export class FakeClientApi implements ClientApi {
  readonly calls: RecordedCall[] = [];
  readonly functions = new Map<string, StoredFunction>();
  readonly runs = new Map<string, RunView>();
  readonly steps = new Map<string, StepView[]>();
  /** When set, every method throws it (for error-path tests). */
  failWith?: unknown;
  private seq = 0;

  private record(method: string, scope: CallScope, input: unknown): void {
    this.calls.push({ method, scope, input });
    if (this.failWith !== undefined) throw this.failWith;
  }

  lastCall(method: string): RecordedCall | undefined {
    return [...this.calls].reverse().find((c) => c.method === method);
  }

  private nextId(prefix: string): string {
    this.seq += 1;
    return `${prefix}_${String(this.seq).padStart(4, '0')}`;
  }

  async registerFunction(scope: CallScope, input: RegisterFunctionInput) {
    this.record('registerFunction', scope, input);
    if (!input.id) throw new EngineError('VALIDATION_ERROR', 'id is required');
    const previous = this.functions.get(input.id);
    const fn: StoredFunction = {
      id: input.id,
      name: input.name ?? input.id,
      description: input.description,
      mode: input.mode ?? 'push',
      endpointUrl: input.endpointUrl,
      triggers: input.triggers ?? [],
      retry: input.retry ?? DEFAULT_RETRY,
      timeoutMs: input.timeoutMs ?? DEFAULT_FUNCTION_TIMEOUT_MS,
      concurrency: input.concurrency,
      cancelOn: input.cancelOn ?? [],
      metadata: input.metadata,
      version: previous ? previous.version + 1 : 1,
    };
    this.functions.set(fn.id, fn);
    return { function: fn, created: !previous };
  }

  async listFunctions(scope: CallScope) {
    this.record('listFunctions', scope, undefined);
    return [...this.functions.values()];
  }

  private start(input: TriggerInput): { eventId: string; runs: RunView[] } {
    const eventId = this.nextId('evt');
    const now = '2025-01-02T03:04:05.678Z';
    const data = (input.data ?? {}) as Record<string, unknown>;
    const runs: RunView[] = [];
    for (const fn of this.functions.values()) {
      if (!fn.triggers.some((t) => t.event === input.event)) continue;
      const run: RunView = {
        id: this.nextId('run'),
        functionId: fn.id,
        functionVersion: fn.version,
        eventId,
        executionMode: fn.mode,
        status: 'waiting_for_capacity',
        attempt: 0,
        maxAttempts: fn.retry.maxAttempts,
        input: input.data,
        createdAt: now,
        updatedAt: now,
      };
      if (data.fail) {
        Object.assign(run, {
          status: 'failed',
          attempt: 1,
          error: { message: 'boom', code: 'INVOKE_FAILED', retryable: false, child_run_id: 'run_child' },
          startedAt: now,
          endedAt: '2025-01-02T03:04:06.000Z',
        });
      } else if ('output' in data) {
        Object.assign(run, { status: 'completed', attempt: 1, output: data.output, startedAt: now, endedAt: now });
      }
      this.runs.set(run.id, run);
      runs.push(run);
    }
    return { eventId, runs };
  }

  async trigger(scope: CallScope, input: TriggerInput) {
    this.record('trigger', scope, input);
    const { eventId, runs } = this.start(input);
    return { eventId, runIds: runs.map((r) => r.id), debouncedFunctionIds: [], duplicate: false };
  }

  async invokeFunctionSync(scope: CallScope, input: { functionId: string; input: unknown; timeoutMs?: number }): Promise<RunResultView> {
    this.record('invokeFunctionSync', scope, input);
    return { runId: 'run_invoked', functionId: input.functionId, status: 'completed', output: input.input, durationMs: 7 };
  }

  async triggerSync(scope: CallScope, input: TriggerInput & { timeoutMs?: number }) {
    this.record('triggerSync', scope, input);
    const { eventId, runs } = this.start(input);
    const results: RunResultView[] = runs.map((r) => ({
      runId: r.id,
      functionId: r.functionId,
      status: r.status,
      output: r.output,
      error: r.error,
      durationMs: 1234,
    }));
    return { eventId, results };
  }

  async getRun(scope: CallScope, id: string) {
    this.record('getRun', scope, id);
    const run = this.runs.get(id);
    if (!run) throw new EngineError('RUN_NOT_FOUND', `run ${id} not found`, { run_id: id });
    return run;
  }

  async listRuns(scope: CallScope, input: ListRunsInput) {
    this.record('listRuns', scope, input);
    const runs = [...this.runs.values()].filter(
      (r) => (!input.functionId || r.functionId === input.functionId) && (!input.status || r.status === input.status),
    );
    return { runs: runs.slice(0, input.limit ?? 50), nextCursor: '', totalCount: runs.length };
  }

  async getRunSteps(scope: CallScope, id: string) {
    this.record('getRunSteps', scope, id);
    const run = await this.getRun(scope, id);
    const children = [...this.runs.values()].filter((r) => r.parentRunId === run.id);
    return {
      steps: this.steps.get(id) ?? [],
      history: [{ eventType: 'run.created', ts: run.createdAt, data: ['a', 1] }],
      children,
    };
  }

  /** Pauses at once: the run becomes `paused` (with the reason). */
  async pauseRun(scope: CallScope, id: string, reason?: string) {
    this.record('pauseRun', scope, { id, reason });
    const run = await this.getRun(scope, id);
    const paused: RunView = { ...run, status: 'paused', pauseRequested: true, ...(reason ? { pauseReason: reason } : {}) };
    this.runs.set(id, paused);
    return { status: 'paused' as const, run: paused };
  }

  async resumeRun(scope: CallScope, id: string, fromStep?: string) {
    this.record('resumeRun', scope, { id, fromStep });
    const run = await this.getRun(scope, id);
    const resumed: RunView = { ...run, status: 'waiting_for_capacity' };
    delete resumed.pauseRequested;
    delete resumed.pauseReason;
    this.runs.set(id, resumed);
    return resumed;
  }

  /** The run's completed steps (from `steps`), the first waiting one as the hint. */
  async getPausedState(scope: CallScope, id: string) {
    this.record('getPausedState', scope, { id });
    const run = await this.getRun(scope, id);
    const steps = this.steps.get(id) ?? [];
    return {
      steps: steps.filter((s) => s.status !== 'waiting').map((s) => ({ id: s.id, name: s.name, type: s.type, status: s.status, output: s.output, injected: s.injected === true, ...(s.endedAt ? { completedAt: s.endedAt } : {}) })),
      nextStepHint: steps.find((s) => s.status === 'waiting')?.name ?? '',
      pauseReason: run.pauseReason ?? '',
    };
  }

  async injectStepOutput(scope: CallScope, input: { runId: string; stepId: string; output: unknown; reason?: string }) {
    this.record('injectStepOutput', scope, input);
    const steps = this.steps.get(input.runId) ?? [];
    const previous = steps.find((s) => s.id === input.stepId);
    return { stepId: input.stepId, ...(previous?.output !== undefined ? { previousOutput: previous.output } : {}) };
  }

  async cancelRun(scope: CallScope, id: string, reason: string) {
    this.record('cancelRun', scope, { id, reason });
    const run = await this.getRun(scope, id);
    if (isTerminalRunStatus(run.status)) {
      throw new EngineError('RUN_NOT_RUNNING', `run ${id} is already ${run.status}`);
    }
    const cancelled: RunView = {
      ...run,
      status: 'cancelled',
      error: { message: reason || 'cancelled', code: 'CANCELLED' },
      endedAt: '2025-01-02T03:05:00.000Z',
    };
    this.runs.set(id, cancelled);
    return cancelled;
  }
}
