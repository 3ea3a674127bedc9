/**
 * Engine error codes → Connect codes, and the one function each transport uses to turn a thrown
 * value into what goes on the wire (WIRE-PROTOCOL.md 5.1).
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { type EngineErrorCode, isEngineError } from '@ironflow/contracts';
import { toStruct } from './client-mapping';
import { EngineErrorInfoSchema } from '@ironflow/contracts/proto';

/** Response header / gRPC trailer carrying our engine code next to the Connect code. */
export const IRONFLOW_ERROR_CODE_HEADER = 'ironflow-error-code';

/**
 * The Connect code for each engine code. 404 → not_found; 400 → invalid_argument; 413
 * (PAYLOAD_TOO_LARGE) → resource_exhausted, as Connect and gRPC answer a message over the limit;
 * 409 → aborted for a lost fence (STALE_EXECUTION, retry after re-reading) and
 * failed_precondition for a state conflict (RUN_NOT_RUNNING, FUNCTION_DEBOUNCED); 401 →
 * unauthenticated; 403 → permission_denied; 503 (SECRETS_NOT_CONFIGURED, and UNAVAILABLE during a
 * drain) → unavailable, which clients retry.
 */
export function connectCodeOf(code: EngineErrorCode): Code {
  switch (code) {
    case 'RUN_NOT_FOUND':
    case 'FUNCTION_NOT_FOUND':
    case 'WORKER_NOT_FOUND':
    case 'JOB_NOT_FOUND':
    case 'SECRET_NOT_FOUND':
    case 'API_KEY_NOT_FOUND':
      return Code.NotFound;
    case 'INVALID_JSON':
    case 'VALIDATION_ERROR':
      return Code.InvalidArgument;
    case 'PAYLOAD_TOO_LARGE':
      return Code.ResourceExhausted;
    case 'STALE_EXECUTION':
      return Code.Aborted;
    case 'RUN_NOT_RUNNING':
    case 'RUN_NOT_PAUSED':
    case 'FUNCTION_DEBOUNCED':
      return Code.FailedPrecondition;
    case 'UNAUTHENTICATED':
      return Code.Unauthenticated;
    case 'PERMISSION_DENIED':
      return Code.PermissionDenied;
    case 'SECRETS_NOT_CONFIGURED':
    case 'UNAVAILABLE':
      return Code.Unavailable;
    case 'INTERNAL_ERROR':
      return Code.Internal;
  }
}

/** `Code.InvalidArgument` → `"invalid_argument"` (the Connect protocol's JSON spelling). */
export function connectCodeString(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase();
}

/** HTTP status for a Connect code, per the Connect protocol's unary mapping. */
export function httpStatusOfConnectCode(code: Code): number {
  switch (code) {
    case Code.Canceled:
      return 499;
    case Code.InvalidArgument:
    case Code.FailedPrecondition:
    case Code.OutOfRange:
      return 400;
    case Code.DeadlineExceeded:
      return 504;
    case Code.NotFound:
      return 404;
    case Code.AlreadyExists:
    case Code.Aborted:
      return 409;
    case Code.PermissionDenied:
      return 403;
    case Code.ResourceExhausted:
      return 429;
    case Code.Unimplemented:
      return 501;
    case Code.Unavailable:
      return 503;
    case Code.Unauthenticated:
      return 401;
    case Code.Unknown:
    case Code.Internal:
    case Code.DataLoss:
    default:
      return 500;
  }
}

/**
 * Any thrown value → `ConnectError`, for the Connect/gRPC/gRPC-Web handlers.
 * - `EngineError`: Connect code from {@link connectCodeOf}, its message, our code in the
 *   `ironflow-error-code` header/trailer and an `ironflow.v1.EngineErrorInfo` detail
 *   `{code, details}`.
 * - `ConnectError`: unchanged.
 * - anything else: `internal` with the message "internal error" (the cause is kept on the error
 *   object for logging, never sent).
 */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (isEngineError(err)) {
    const details = toStruct(err.details);
    return new ConnectError(
      err.message,
      connectCodeOf(err.code),
      { [IRONFLOW_ERROR_CODE_HEADER]: err.code },
      [{ desc: EngineErrorInfoSchema, value: { code: err.code, ...(details ? { details } : {}) } }],
      err,
    );
  }
  return new ConnectError('internal error', Code.Internal, { [IRONFLOW_ERROR_CODE_HEADER]: 'INTERNAL_ERROR' }, [], err);
}
