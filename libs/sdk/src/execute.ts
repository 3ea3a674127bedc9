import type { InvocationError, PushResponse, StepResult, WireEvent } from '@ironflow/contracts';
import { IronflowError, StepError, errorMessage, isFetchTypeError } from './errors';
import type { IronflowEvent, IronflowFunction } from './function';
import { MemoizedStep, ResumeInfo, StepSession, toJsonValue } from './step-tools';
import { PublishTarget, createPublisher } from './publish';

/** Which transport an invocation came over; it decides one retryable rule (WIRE-PROTOCOL.md 1.8). */
export type Transport = 'push' | 'pull';

/**
 * The result of one invocation: `completed` (with `result`, absent when the handler returned
 * `undefined`), `failed` (with `error`) or `yielded` (with the one `yield`). `steps` holds only the
 * steps executed in this invocation. This is exactly the push response body (2.3).
 */
export type InvocationOutcome = PushResponse;

/** Everything one invocation needs. */
export interface InvocationInput {
  fn: IronflowFunction<any, any>;
  runId: string;
  /** 1-based attempt, surfaced as `run.attempt`. */
  attempt: number;
  event: WireEvent;
  /** Steps the engine already holds for this run. */
  memo: readonly MemoizedStep[];
  resume?: ResumeInfo;
  secrets?: Record<string, string>;
  transport: Transport;
  /** Called with each StepResult as it is recorded. */
  onStep?: (step: StepResult) => void;
  signal?: AbortSignal;
  now?: () => number;
  /** Where `step.publish` sends (default: `IRONFLOW_SERVER_URL`, `IRONFLOW_API_KEY`, `IRONFLOW_ENV`). */
  publishTo?: PublishTarget;
}

/** Converts the wire event to what a handler sees (`timestamp` as a Date, `version` default 1). */
export function toIronflowEvent(wire: WireEvent): IronflowEvent {
  const event: IronflowEvent = {
    id: wire.id,
    name: wire.name,
    data: wire.data,
    timestamp: new Date(wire.timestamp),
    version: wire.version ?? 1,
  };
  if (wire.idempotency_key !== undefined) event.idempotencyKey = wire.idempotency_key;
  if (wire.source !== undefined) event.source = wire.source;
  if (wire.metadata !== undefined && wire.metadata !== null) event.metadata = wire.metadata;
  return event;
}

/**
 * The error object the engine receives when an invocation fails, with the retryable rules of
 * WIRE-PROTOCOL.md 1.8: an {@link IronflowError} (incl. StepError, StepTimeoutError,
 * InvokeError, NonRetryableError, RetryableError) reports its own `code` and `retryable`; a
 * `TypeError` mentioning "fetch" is retryable; any other thrown value (plain `Error`, string…)
 * is non-retryable on push and retryable on pull, with code `"ERROR"`. `step_id` is set for a
 * StepError; `stack` when the value has one.
 */
export function toInvocationError(err: unknown, transport: Transport): InvocationError {
  let error: InvocationError;
  if (err instanceof IronflowError) {
    error = { message: err.message, code: err.code, retryable: err.retryable };
    if (err instanceof StepError) error.step_id = err.stepId;
  } else {
    error = { message: errorMessage(err), code: 'ERROR', retryable: isFetchTypeError(err) || transport === 'pull' };
  }
  if (err instanceof Error && err.stack) error.stack = err.stack;
  return error;
}

const NEVER_ABORTED = new AbortController().signal;

/**
 * Runs one invocation of `input.fn` (WIRE-PROTOCOL.md 1.1): calls the handler from the top with
 * the memoized steps, runs new `step.run` steps inline, and stops at the first unsatisfied wait.
 *
 * Never throws: a handler error becomes a `failed` outcome; a first yield wins over anything the
 * handler did afterwards (even if it caught the yield signal and returned or threw). A result that
 * cannot be serialized to JSON fails the invocation with code `SERIALIZATION_ERROR`
 * (non-retryable).
 */
export async function executeInvocation(input: InvocationInput): Promise<InvocationOutcome> {
  const memo = new Map<string, MemoizedStep>();
  for (const step of input.memo) memo.set(step.id, step);
  const session = new StepSession({
    runId: input.runId,
    memo,
    resume: input.resume,
    stepTimeoutMs: input.fn.config.stepTimeoutMs,
    onStep: input.onStep,
    now: input.now,
    publish: createPublisher(input.publishTo ?? {}, input.runId),
    signal: input.signal,
  });
  const secrets = input.secrets ?? {};
  let returned: unknown;
  let thrown: { err: unknown } | undefined;
  try {
    returned = await input.fn.handler({
      event: toIronflowEvent(input.event),
      step: session,
      run: { id: input.runId, attempt: input.attempt, functionId: input.fn.id },
      attempt: input.attempt,
      secrets: { get: (name: string) => (Object.prototype.hasOwnProperty.call(secrets, name) ? secrets[name] : undefined) },
      signal: input.signal ?? NEVER_ABORTED,
    });
  } catch (err) {
    thrown = { err };
  }
  const steps = session.steps;
  if (session.pendingYield) return { status: 'yielded', yield: session.pendingYield, steps };
  if (thrown) return { status: 'failed', error: toInvocationError(thrown.err, input.transport), steps };
  let result: unknown;
  try {
    result = toJsonValue(returned);
  } catch (err) {
    return {
      status: 'failed',
      error: { message: `function result is not JSON-serializable: ${errorMessage(err)}`, code: 'SERIALIZATION_ERROR', retryable: false },
      steps,
    };
  }
  return result === undefined ? { status: 'completed', steps } : { status: 'completed', result, steps };
}
