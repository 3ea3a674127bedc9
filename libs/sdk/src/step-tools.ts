import type { StepResult, YieldInfo } from '@ironflow/contracts';
import { Duration, formatDuration, toMs } from './duration';
import { IronflowError, InvokeError, StepError, StepsAbortedError, StepTimeoutError, errorMessage, isFetchTypeError } from './errors';
import { StepIdAllocator } from './step-id';
import { refuseUnknownOptions } from './known-options';
import type { PublishResult, Publisher } from './publish';
import { YieldSignal, isYieldSignal } from './yield-signal';

/** Default `invoke_timeout_ms` of `step.invoke` (WIRE-PROTOCOL.md 6). */
export const DEFAULT_INVOKE_TIMEOUT_MS = 30_000;
/** Default `event_filter.timeout` of `step.waitForEvent` (WIRE-PROTOCOL.md 6). */
export const DEFAULT_WAIT_TIMEOUT = '7d';

/**
 * A step the engine already holds for this run (memoized). Push requests carry all three statuses
 * and a JSON-string `error`; pull assignments only carry completed rows.
 */
export interface MemoizedStep {
  id: string;
  name: string;
  status: 'completed' | 'failed' | 'timed_out';
  output?: unknown;
  error?: string;
}

/** The push request's `resume` (WIRE-PROTOCOL.md 2.2): consulted once, for the step it names. */
export interface ResumeInfo {
  step_id: string;
  type: 'sleep' | 'wait_for_event' | 'invoke_function' | 'invoke_function_async';
  data?: unknown;
}

/** Options of `step.run`. `timeout`: ms or duration string; overrides the function's `stepTimeoutMs`. */
export interface RunStepOptions {
  timeout?: Duration;
}

/**
 * Options of `step.waitForEvent`.
 * - `event`: event name to wait for (non-empty; sent trimmed).
 * - `match`: a path into the event data (`"data.requestId"`, `"event.data.requestId"` or
 *   `"requestId"`): the awaited event's value there must equal the triggering event's.
 * - `timeout`: ms (must be finite and > 0; sent as the largest whole unit, floored: 90000 → "1m")
 *   or a duration string (`"36h"`; sent as is once it parses to more than 0 ms, else
 *   `INVALID_STEP`). Default `"7d"`.
 */
export interface WaitForEventOptions {
  event: string;
  match?: string;
  timeout?: Duration;
}

/** Options of `step.invoke`. `timeout`: ms or duration string; default 30000 ms. */
export interface InvokeOptions {
  timeout?: Duration;
}

/**
 * The durable primitives a handler gets as `step`. Every call computes a deterministic step id
 * `<runId>:<esc(name)>:<k>` (k = how many times `name` was used before in this invocation), so
 * call order must be the same on every replay.
 *
 * Errors common to all: `IronflowError` code `INVALID_STEP` (non-retryable) for a bad argument
 * (empty name, duration ≤ 0, sleepUntil in the past, empty event name, an option the step does
 * not have, e.g. a misspelt `match`).
 */
export interface StepTools {
  /**
   * Runs `fn` once per run and memoizes its JSON result. On replay returns the stored output
   * without calling `fn`. The returned value is the JSON round-trip of `fn`'s result (the same on
   * the first run and on replays; `undefined` stays `undefined`).
   * Throws {@link StepError} (code `STEP_FAILED`, the original error as `cause`) when `fn` throws,
   * {@link StepTimeoutError} (retryable) when `fn` exceeds `options.timeout` / `stepTimeoutMs`.
   */
  run<T>(name: string, fn: () => T | Promise<T>, options?: RunStepOptions): Promise<Awaited<T>>;
  /** Sleeps `duration` (ms number or string like `"2s"`, must be > 0) durably. Resolves `undefined` once woken. */
  sleep(name: string, duration: Duration): Promise<void>;
  /** Sleeps until `time` (Date, ISO string or epoch ms; must be in the future on the first call). */
  sleepUntil(name: string, time: Date | string | number): Promise<void>;
  /**
   * Waits for an event and resolves to it, raw as the engine stored it (normally
   * `{id, name, data, timestamp, ...}`; timestamps stay strings).
   */
  waitForEvent<T = unknown>(name: string, options: WaitForEventOptions): Promise<T>;
  /**
   * Starts function `functionId` as a child run with `input` and resolves to its output. The step
   * name is `functionId`. Throws {@link InvokeError} when the child failed (`functionId`,
   * `childRunId`, `causeMessage` parsed from the engine's JSON error) or timed out
   * (`"invoke timed out"`).
   */
  invoke<T = unknown>(functionId: string, input?: unknown, options?: InvokeOptions): Promise<T>;
  /** Starts `functionId` as a child run without waiting; resolves to `{ runId }` of the child. */
  invokeAsync(functionId: string, input?: unknown): Promise<{ runId: string }>;
  /**
   * Publishes `data` to a developer pub/sub topic, once per run: a `step.run` named
   * `publish:<topic>` that calls `PubSubService/Publish` (WIRE-PROTOCOL.md 5.4) and memoizes
   * `{eventId, sequence, duplicate}`. Throws {@link StepError} when the engine refuses it.
   */
  publish(topic: string, data: unknown): Promise<PublishResult>;
}

/** What one invocation's step tools need to know. */
export interface StepSessionInput {
  runId: string;
  memo: ReadonlyMap<string, MemoizedStep>;
  resume?: ResumeInfo;
  /** Default `step.run` timeout in ms (the function's `stepTimeoutMs`). */
  stepTimeoutMs?: number;
  /** Called with each StepResult as soon as it is recorded (pull checkpointing). */
  onStep?: (step: StepResult) => void;
  /** Clock, for tests. */
  now?: () => number;
  /** What `step.publish` calls. */
  publish?: Publisher;
  /**
   * The invocation's abort signal (the run was cancelled, its lease was lost, the worker stops):
   * once aborted, no new step starts — every step primitive throws {@link StepsAbortedError}.
   */
  signal?: AbortSignal;
}

/** The keys of each step's options; a step refuses any other with `INVALID_STEP`. */
const RUN_OPTION_KEYS: ReadonlySet<string> = new Set(['timeout'] satisfies (keyof RunStepOptions)[]);
const WAIT_OPTION_KEYS: ReadonlySet<string> = new Set(['event', 'match', 'timeout'] satisfies (keyof WaitForEventOptions)[]);
const INVOKE_OPTION_KEYS: ReadonlySet<string> = new Set(['timeout'] satisfies (keyof InvokeOptions)[]);

function invalid(message: string): IronflowError {
  return new IronflowError(message, { code: 'INVALID_STEP', retryable: false });
}

function requireName(kind: string, name: unknown): string {
  if (typeof name !== 'string' || name === '') throw invalid(`${kind}: step name must be a non-empty string`);
  return name;
}

/** JSON round-trip, so a value looks the same on the first run as after memoization. */
export function toJsonValue(value: unknown): unknown {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  return text === undefined ? undefined : JSON.parse(text);
}

/** Retryable flag of an error thrown inside `step.run` (WIRE-PROTOCOL.md 1.8). */
function stepFailureRetryable(err: unknown): boolean {
  if (err instanceof IronflowError) return err.retryable;
  return isFetchTypeError(err);
}

/**
 * Builds an {@link InvokeError} from a failed/timed-out invoke row's `error` string, which the
 * engine writes as JSON `{function_id?, child_run_id?, cause?, message?}`. A non-JSON string is
 * the cause text; nothing usable gives "unknown error".
 */
export function invokeErrorFromRow(functionId: string, error: string | undefined, timedOut = false): InvokeError {
  let parsed: unknown = undefined;
  if (typeof error === 'string' && error !== '') {
    try {
      parsed = JSON.parse(error);
    } catch {
      parsed = error;
    }
  }
  let fnId = functionId;
  let childRunId: string | undefined;
  let cause = 'unknown error';
  if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
    const o = parsed as Record<string, unknown>;
    if (typeof o.function_id === 'string' && o.function_id !== '') fnId = o.function_id;
    if (typeof o.child_run_id === 'string' && o.child_run_id !== '') childRunId = o.child_run_id;
    const c = o.cause ?? o.message;
    if (typeof c === 'string' && c !== '') cause = c;
    else if (c !== null && typeof c === 'object' && typeof (c as { message?: unknown }).message === 'string') {
      cause = (c as { message: string }).message;
    } else if (c !== undefined && c !== null && c !== '') cause = errorMessage(c);
  } else if (typeof parsed === 'string' && parsed !== '') {
    cause = parsed;
  } else if (parsed !== undefined && parsed !== null) {
    cause = String(parsed);
  }
  if (timedOut) return new InvokeError('invoke timed out', fnId, childRunId, 'invoke timed out');
  return new InvokeError(`invoked function "${fnId}" failed: ${cause}`, fnId, childRunId, cause);
}

/**
 * The step API of one invocation. Records executed steps (`steps`) and the first yield
 * (`pendingYield`); once an invocation has yielded every further primitive throws the same
 * yield signal.
 */
export class StepSession implements StepTools {
  /** StepResults of steps executed in this invocation, in completion order. */
  readonly steps: StepResult[] = [];
  /** The first wait that could not be satisfied; set before its signal is thrown. */
  pendingYield?: YieldInfo;

  private readonly ids: StepIdAllocator;
  private resumeUsed = false;
  private readonly now: () => number;

  constructor(private readonly input: StepSessionInput) {
    this.ids = new StepIdAllocator(input.runId, (id) => input.memo.has(id));
    this.now = input.now ?? Date.now;
  }

  async run<T>(name: string, fn: () => T | Promise<T>, options: RunStepOptions = {}): Promise<Awaited<T>> {
    this.beforeStep();
    requireName('step.run', name);
    if (typeof fn !== 'function') throw invalid(`step.run("${name}"): fn must be a function`);
    refuseUnknownOptions(`step.run("${name}")`, options, RUN_OPTION_KEYS, { code: 'INVALID_STEP' });
    const timeoutMs = options.timeout !== undefined ? this.positiveMs('step.run timeout', options.timeout) : this.input.stepTimeoutMs;
    const id = this.ids.next(name);
    const memo = this.input.memo.get(id);
    if (memo?.status === 'completed') return memo.output as Awaited<T>;

    const startedMs = this.now();
    const startedAt = new Date(startedMs).toISOString();
    let timer: NodeJS.Timeout | undefined;
    try {
      const running = Promise.resolve().then(fn);
      // A body that settles after its timeout must not become an unhandled rejection.
      if (timeoutMs !== undefined) running.catch(() => undefined);
      const value = timeoutMs === undefined ? await running : await Promise.race([running, this.timeout(id, name, timeoutMs, (t) => (timer = t))]);
      const output = toJsonValue(value);
      const endedMs = this.now();
      const result: StepResult = {
        id,
        name,
        type: 'invoke',
        status: 'completed',
        started_at: startedAt,
        ended_at: new Date(endedMs).toISOString(),
        duration_ms: endedMs - startedMs,
      };
      if (output !== undefined) result.output = output;
      this.record(result);
      return output as Awaited<T>;
    } catch (err) {
      if (isYieldSignal(err)) throw err;
      const endedMs = this.now();
      const retryable = err instanceof StepTimeoutError ? true : stepFailureRetryable(err);
      const error: NonNullable<StepResult['error']> = { message: errorMessage(err), retryable };
      if (err instanceof Error && err.stack) error.stack = err.stack;
      this.record({
        id,
        name,
        type: 'invoke',
        status: 'failed',
        started_at: startedAt,
        ended_at: new Date(endedMs).toISOString(),
        duration_ms: endedMs - startedMs,
        error,
      });
      if (err instanceof StepTimeoutError) throw err;
      throw new StepError(`step "${name}" failed: ${errorMessage(err)}`, id, name, { retryable, cause: err });
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  async sleep(name: string, duration: Duration): Promise<void> {
    this.beforeStep();
    requireName('step.sleep', name);
    const id = this.ids.next(name);
    if (this.resumed(id, 'sleep') || this.input.memo.get(id)?.status === 'completed') return;
    const durationMs = this.positiveMs(`step.sleep("${name}") duration`, duration);
    this.yield({ type: 'sleep', step_id: id, until: new Date(this.now() + durationMs).toISOString() });
  }

  async sleepUntil(name: string, time: Date | string | number): Promise<void> {
    this.beforeStep();
    requireName('step.sleepUntil', name);
    const until = time instanceof Date ? time : new Date(time);
    if (Number.isNaN(until.getTime())) throw invalid(`step.sleepUntil("${name}"): invalid time ${JSON.stringify(time)}`);
    const id = this.ids.next(name);
    if (this.resumed(id, 'sleep') || this.input.memo.get(id)?.status === 'completed') return;
    if (until.getTime() <= this.now()) throw invalid(`step.sleepUntil("${name}"): ${until.toISOString()} is not in the future`);
    this.yield({ type: 'sleep', step_id: id, until: until.toISOString() });
  }

  async waitForEvent<T = unknown>(name: string, options: WaitForEventOptions): Promise<T> {
    this.beforeStep();
    requireName('step.waitForEvent', name);
    const event = typeof options?.event === 'string' ? options.event.trim() : '';
    if (event === '') throw invalid(`step.waitForEvent("${name}"): event must be a non-empty string`);
    // A misspelt `match` would make the wait take any event of the name: refused, never dropped.
    refuseUnknownOptions(`step.waitForEvent("${name}")`, options, WAIT_OPTION_KEYS, { code: 'INVALID_STEP' });
    let timeout = DEFAULT_WAIT_TIMEOUT;
    if (typeof options.timeout === 'number') {
      if (!Number.isFinite(options.timeout) || options.timeout <= 0) throw invalid(`step.waitForEvent("${name}"): timeout must be > 0 ms`);
      timeout = formatDuration(options.timeout);
    } else if (options.timeout !== undefined) {
      // Checked here as step.sleep's is: a string the engine cannot read would otherwise fail the
      // run later, as a rejected report, without naming the option.
      this.positiveMs(`step.waitForEvent("${name}") timeout`, options.timeout);
      timeout = options.timeout;
    }
    const id = this.ids.next(name);
    const resume = this.input.resume;
    if (!this.resumeUsed && resume?.step_id === id && resume.type === 'wait_for_event' && resume.data) {
      this.resumeUsed = true;
      return resume.data as T;
    }
    const memo = this.input.memo.get(id);
    if (memo?.status === 'completed' && memo.output) return memo.output as T;
    const filter: { event: string; match?: string; timeout: string } = { event, timeout };
    if (options.match !== undefined) filter.match = options.match;
    return this.yield({ type: 'wait_for_event', step_id: id, event_filter: filter });
  }

  async invoke<T = unknown>(functionId: string, input?: unknown, options: InvokeOptions = {}): Promise<T> {
    this.beforeStep();
    requireName('step.invoke', functionId);
    refuseUnknownOptions(`step.invoke("${functionId}")`, options, INVOKE_OPTION_KEYS, { code: 'INVALID_STEP' });
    const timeoutMs = options.timeout !== undefined ? this.positiveMs(`step.invoke("${functionId}") timeout`, options.timeout) : DEFAULT_INVOKE_TIMEOUT_MS;
    const id = this.ids.next(functionId);
    const memo = this.input.memo.get(id);
    if (memo?.status === 'completed') return memo.output as T;
    if (memo?.status === 'failed') throw invokeErrorFromRow(functionId, memo.error);
    if (memo?.status === 'timed_out') throw invokeErrorFromRow(functionId, memo.error, true);
    const info: YieldInfo = { type: 'invoke_function', step_id: id, function_id: functionId, invoke_timeout_ms: timeoutMs };
    const wireInput = toJsonValue(input);
    if (wireInput !== undefined) info.input = wireInput;
    return this.yield(info);
  }

  async publish(topic: string, data: unknown): Promise<PublishResult> {
    requireName('step.publish', topic);
    const publisher = this.input.publish;
    if (!publisher) throw invalid('step.publish: no publisher is configured for this invocation');
    return this.run(`publish:${topic}`, () => publisher(topic, data));
  }

  async invokeAsync(functionId: string, input?: unknown): Promise<{ runId: string }> {
    this.beforeStep();
    requireName('step.invokeAsync', functionId);
    const id = this.ids.next(functionId);
    const memo = this.input.memo.get(id);
    if (memo?.status === 'completed') {
      const runId = (memo.output as { run_id?: unknown } | null | undefined)?.run_id;
      if (typeof runId !== 'string' || runId === '') {
        throw new InvokeError(`invokeAsync of "${functionId}": the engine's step ${id} has no output.run_id`, functionId, undefined, 'missing run_id');
      }
      return { runId };
    }
    if (memo?.status === 'failed' || memo?.status === 'timed_out') throw invokeErrorFromRow(functionId, memo.error);
    const info: YieldInfo = { type: 'invoke_function_async', step_id: id, function_id: functionId };
    const wireInput = toJsonValue(input);
    if (wireInput !== undefined) info.input = wireInput;
    return this.yield(info);
  }

  private record(step: StepResult): void {
    this.steps.push(step);
    this.input.onStep?.(step);
  }

  private resumed(id: string, type: ResumeInfo['type']): boolean {
    const resume = this.input.resume;
    if (this.resumeUsed || resume?.step_id !== id || resume.type !== type) return false;
    this.resumeUsed = true;
    return true;
  }

  private yield(info: YieldInfo): never {
    this.pendingYield ??= info;
    throw new YieldSignal(this.pendingYield);
  }

  /** Before any step primitive: the first yield is thrown again; an aborted invocation starts no step. */
  private beforeStep(): void {
    if (this.pendingYield) throw new YieldSignal(this.pendingYield);
    const signal = this.input.signal;
    if (signal?.aborted) throw new StepsAbortedError(signal.reason);
  }

  private positiveMs(what: string, duration: Duration): number {
    let value: number;
    try {
      value = toMs(duration);
    } catch {
      throw invalid(`${what}: invalid duration ${JSON.stringify(duration)}`);
    }
    if (!(value > 0)) throw invalid(`${what} must be > 0 ms, got ${JSON.stringify(duration)}`);
    return value;
  }

  private timeout(id: string, name: string, timeoutMs: number, setTimer: (t: NodeJS.Timeout) => void): Promise<never> {
    return new Promise<never>((_, reject) => {
      setTimer(setTimeout(() => reject(new StepTimeoutError(id, name, timeoutMs)), timeoutMs));
    });
  }
}
