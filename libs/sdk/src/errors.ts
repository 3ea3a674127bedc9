/**
 * Error classes of the SDK (WIRE-PROTOCOL.md 1.8, 5.1). Every error the SDK reports to the engine
 * carries a stable string `code` and a `retryable` flag; the engine schedules retries from that
 * flag and the function's `retry` config. Codes, not `instanceof`, are what survive the wire.
 */

/** Options of {@link IronflowError}. */
export interface IronflowErrorOptions {
  /** Stable code reported as `error.code`. Default `"ERROR"`. */
  code?: string;
  /** Whether the engine may retry the run after this error. Default `false`. */
  retryable?: boolean;
  /** The underlying error, kept for logs (not sent on the wire). */
  cause?: unknown;
}

/**
 * Base class of every SDK error.
 *
 * `new IronflowError(message, { code?: string = "ERROR", retryable?: boolean = false, cause? })`.
 * Thrown out of a handler (directly or inside `step.run`), its `code` and `retryable` are reported
 * as they are, on push and pull alike.
 */
export class IronflowError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  override readonly cause?: unknown;

  constructor(message: string, options: IronflowErrorOptions = {}) {
    super(message);
    this.name = 'IronflowError';
    this.code = options.code ?? 'ERROR';
    this.retryable = options.retryable ?? false;
    if (options.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * A failure no retry can fix: the run fails at once. `retryable` is always `false`.
 * `new NonRetryableError(message, { code?: string = "NON_RETRYABLE", cause? })`.
 */
export class NonRetryableError extends IronflowError {
  constructor(message: string, options: Omit<IronflowErrorOptions, 'retryable'> = {}) {
    super(message, { code: options.code ?? 'NON_RETRYABLE', retryable: false, cause: options.cause });
    this.name = 'NonRetryableError';
  }
}

/**
 * A transient failure the engine should retry (within the function's `retry.maxAttempts`).
 * `retryable` is always `true`. This class is an addition of this SDK (v0.29 has no such class);
 * it lets a handler ask for a retry explicitly, which matters on push, where a plain `Error`
 * thrown outside a step is reported non-retryable.
 * `new RetryableError(message, { code?: string = "RETRYABLE", cause? })`.
 */
export class RetryableError extends IronflowError {
  constructor(message: string, options: Omit<IronflowErrorOptions, 'retryable'> = {}) {
    super(message, { code: options.code ?? 'RETRYABLE', retryable: true, cause: options.cause });
    this.name = 'RetryableError';
  }
}

/**
 * Thrown by `step.run` when the step's function threw. Code `STEP_FAILED`; `retryable` is the
 * wrapped error's flag when it is an {@link IronflowError}, `true` for a `TypeError` mentioning
 * "fetch" (a network failure), `false` for anything else. `stepId`/`stepName` name the step; the
 * original error is `cause`. A failed invocation caused by it reports `error.step_id = stepId`.
 */
export class StepError extends IronflowError {
  constructor(
    message: string,
    readonly stepId: string,
    readonly stepName: string,
    options: { retryable: boolean; cause?: unknown },
  ) {
    super(message, { code: 'STEP_FAILED', retryable: options.retryable, cause: options.cause });
    this.name = 'StepError';
  }
}

/**
 * Thrown by `step.run` when its function ran longer than the step timeout (`timeout` option or the
 * function's `stepTimeoutMs`). Code `STEP_TIMEOUT`, retryable `true`; it is thrown as is, never
 * wrapped in a {@link StepError}. `timeoutMs` is the limit that was exceeded.
 */
export class StepTimeoutError extends IronflowError {
  constructor(
    readonly stepId: string,
    readonly stepName: string,
    readonly timeoutMs: number,
  ) {
    super(`step "${stepName}" timed out after ${timeoutMs}ms`, { code: 'STEP_TIMEOUT', retryable: true });
    this.name = 'StepTimeoutError';
  }
}

/**
 * Thrown by `step.invoke` / `step.invokeAsync` when the child run failed or timed out.
 * Code `INVOKE_FAILED`, retryable `false`. `functionId` is the invoked function, `childRunId` the
 * child run (when the engine said), `causeMessage` the child's error text.
 */
export class InvokeError extends IronflowError {
  constructor(
    message: string,
    readonly functionId: string,
    readonly childRunId: string | undefined,
    readonly causeMessage: string,
  ) {
    super(message, { code: 'INVOKE_FAILED', retryable: false });
    this.name = 'InvokeError';
  }
}

/**
 * A client call (`createClient()`) or a worker registration that the server refused or that never
 * got an answer. `code` is the server's JSON `code` (the Connect code, e.g. `"not_found"`,
 * `"unauthenticated"`), else `"HTTP_<status>"`; `NETWORK_ERROR` / `TIMEOUT` / `ABORTED` /
 * `NO_RESULTS` / `INVALID_RESPONSE` for client-side failures. `engineCode` is the engine's own
 * code when the error body carried one (`ironflowCode` in the Connect error body, e.g.
 * `"RUN_NOT_FOUND"`, `"VALIDATION_ERROR"`), else `undefined`. `status` is the HTTP status (0 when
 * there was no response). `retryable` is true for 5xx, 429, network errors and timeouts, except
 * a request too large (429 `resource_exhausted` with engine code `PAYLOAD_TOO_LARGE`): the same
 * body would be refused again.
 */
export class IronflowClientError extends IronflowError {
  readonly engineCode?: string;

  constructor(
    message: string,
    code: string,
    readonly status: number,
    options: { cause?: unknown; engineCode?: string } = {},
  ) {
    const retryable = options.engineCode !== 'PAYLOAD_TOO_LARGE' && (status === 0 || status === 429 || status >= 500);
    super(message, { code, retryable, cause: options.cause });
    this.name = 'IronflowClientError';
    if (options.engineCode !== undefined) this.engineCode = options.engineCode;
  }
}

/** The error of a run as `TriggerSync` reports it. */
export interface RunErrorInfo {
  message: string;
  code?: string;
}

/**
 * Thrown by `client.emitSync` when the first run's status is exactly `"failed"`.
 * Code `RUN_FAILED`; `runId`, `functionId` and the run's `runError` are attached.
 */
export class RunFailedError extends IronflowError {
  constructor(
    readonly runId: string,
    readonly functionId: string,
    readonly runError: RunErrorInfo | undefined,
  ) {
    super(`run ${runId} of ${functionId} failed: ${runError?.message ?? 'unknown error'}`, { code: 'RUN_FAILED' });
    this.name = 'RunFailedError';
  }
}

/**
 * Thrown by `client.emitSync` when the first run's status is exactly `"cancelled"`.
 * Code `RUN_CANCELLED`; `runId` and `functionId` are attached.
 */
export class RunCancelledError extends IronflowError {
  constructor(
    readonly runId: string,
    readonly functionId: string,
  ) {
    super(`run ${runId} of ${functionId} was cancelled`, { code: 'RUN_CANCELLED' });
    this.name = 'RunCancelledError';
  }
}

/** True for a `TypeError` whose message mentions "fetch": a network failure, always retryable. */
export function isFetchTypeError(err: unknown): boolean {
  return err instanceof TypeError && /fetch/i.test(err.message);
}

/** The message of any thrown value. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

/**
 * Thrown by every step primitive once the invocation's abort signal fired (`code` `ABORTED`, not
 * retryable): the run was cancelled, its lease was lost or the worker stops, so no new step may
 * start. The worker reports nothing for such an invocation; the engine already decided its fate.
 */
export class StepsAbortedError extends IronflowError {
  constructor(reason: unknown) {
    super(`invocation aborted; no new step starts${reason instanceof Error ? `: ${reason.message}` : typeof reason === 'string' ? `: ${reason}` : ''}`, { code: 'ABORTED', retryable: false, cause: reason });
    this.name = 'StepsAbortedError';
  }
}
