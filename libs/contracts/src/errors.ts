/**
 * Error codes the engine answers with, and the HTTP status each maps to. A code is part of the
 * public contract: clients and workers switch on it (WIRE-PROTOCOL.md 3.6, 5.1).
 */
export const ERROR_HTTP_STATUS = {
  STALE_EXECUTION: 409,
  RUN_NOT_RUNNING: 409,
  /** PauseRun state reads and step injection need a `paused` run. */
  RUN_NOT_PAUSED: 409,
  RUN_NOT_FOUND: 404,
  FUNCTION_NOT_FOUND: 404,
  WORKER_NOT_FOUND: 404,
  JOB_NOT_FOUND: 404,
  INVALID_JSON: 400,
  VALIDATION_ERROR: 400,
  PAYLOAD_TOO_LARGE: 413,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  SECRET_NOT_FOUND: 404,
  API_KEY_NOT_FOUND: 404,
  SECRETS_NOT_CONFIGURED: 503,
  /** The engine is shutting down (drain): retry on another replica; the message names the runs. */
  UNAVAILABLE: 503,
  /** TriggerSync of an event that starts a debounced function (WIRE-PROTOCOL.md 5.2): Connect `failed_precondition`. */
  FUNCTION_DEBOUNCED: 400,
  INTERNAL_ERROR: 500,
} as const;
export type EngineErrorCode = keyof typeof ERROR_HTTP_STATUS;

/** Codes the engine writes into a failed run's `error.code`. */
export const RUN_ERROR_CODES = {
  INVOKE_FAILED: 'INVOKE_FAILED',
  EXECUTION_RECOVERY_EXHAUSTED: 'EXECUTION_RECOVERY_EXHAUSTED',
  STREAM_YIELD_UNSUPPORTED: 'STREAM_YIELD_UNSUPPORTED',
  PUSH_DISPATCH_FAILED: 'PUSH_DISPATCH_FAILED',
  FUNCTION_NOT_FOUND: 'FUNCTION_NOT_FOUND',
  CANCELLED: 'CANCELLED',
  /** A terminal report the engine could not apply (a bad yield, U+0000 in a step id, a value the store refuses): retryable. */
  REPORT_REJECTED: 'REPORT_REJECTED',
  /** A report over the payload limit: not retryable (the same output would be too large again). */
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  /** An execution ran past its function's `timeoutMs`: retryable (the usual retry rules). */
  FUNCTION_TIMED_OUT: 'FUNCTION_TIMED_OUT',
  /** A secret the function declares does not exist in its project and env at dispatch (retryable). */
  SECRET_NOT_FOUND: 'SECRET_NOT_FOUND',
  /** The dispatcher cannot decrypt the function's secrets: no `IRONFLOW_SECRETS_KEY`, or another key (retryable). */
  SECRETS_UNAVAILABLE: 'SECRETS_UNAVAILABLE',
  /** The push endpoint's address is refused by the allow-list at dispatch (not retryable). */
  PUSH_ENDPOINT_REFUSED: 'PUSH_ENDPOINT_REFUSED',
} as const;

/**
 * The one error type the engine throws across its boundaries. Transports turn it into
 * `{"code", "message"}` with `httpStatus`; nothing committed is changed by the call that threw it.
 */
export class EngineError extends Error {
  readonly httpStatus: number;
  constructor(
    readonly code: EngineErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'EngineError';
    this.httpStatus = ERROR_HTTP_STATUS[code];
  }
}

export function isEngineError(err: unknown): err is EngineError {
  return err instanceof EngineError;
}

/** A run's stored error: what `GetRun` returns as `error`. */
export interface RunError {
  message: string;
  code?: string;
  retryable?: boolean;
  stack?: string;
  /** For `INVOKE_FAILED`: the child run that failed. */
  child_run_id?: string;
  function_id?: string;
}
