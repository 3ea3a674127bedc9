import { ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { Message } from '@bufbuild/protobuf';
import { type CallScope, type ClientApi, EngineError, isEngineError } from '@ironflow/contracts';
import { callScope } from './call-auth';
import { CLIENT_METHODS, type ClientMethodBinding, type ClientMethodName, defaultHealth } from './client-methods';
import { toConnectError } from './errors';
import { unknownFieldPaths } from './unknown-fields';
import { IronflowService } from '@ironflow/contracts/proto';

export interface ClientServiceOptions {
  /** Answers `Health`; default: `"ok"` whenever the process answers. */
  health?: (scope: CallScope) => Promise<string>;
  /** Called with every error that is not an `EngineError`/`ConnectError` (sent as `internal`). */
  onError?: (err: unknown, method: string) => void;
}

/**
 * The ConnectRPC implementation of `ironflow.v1.IronflowService` (WIRE-PROTOCOL.md section 5)
 * over a `ClientApi`. Register it with `router.service(IronflowService, impl)`; ConnectRPC then
 * serves it over Connect (JSON and binary), gRPC and gRPC-Web.
 *
 * - Scope: the one `authInterceptor` stored for the call (`callScope(ctx)`); mount it with
 *   `createRpcHandlers`, which installs the interceptor.
 * - Mapping: messages ↔ ClientApi shapes in `client-mapping.ts` (RunStatus enum ↔ lowercase
 *   contracts strings, Struct ↔ JSON objects, Timestamp ↔ ISO strings; proto3 zero values mean
 *   "not given"). Non-object user values are wrapped as `{ "value": v }` in Struct fields.
 * - Strict requests: a binding with `strictFields` (RegisterFunction) refuses fields the schema
 *   does not have, at any depth (`VALIDATION_ERROR` naming their numbers), as its JSON route does.
 * - Errors: `EngineError` → `ConnectError` with the code of `connectCodeOf` (404 → not_found,
 *   400 → invalid_argument, 413 → resource_exhausted, 409 → aborted/failed_precondition, 401 → unauthenticated), the
 *   engine code in the `ironflow-error-code` header/trailer and an `EngineErrorInfo` detail.
 *   Other errors → `internal` "internal error" (reported to `options.onError`).
 */
export function createIronflowServiceImpl(api: ClientApi, options: ClientServiceOptions = {}): ServiceImpl<typeof IronflowService> {
  const deps = { api, health: options.health ?? defaultHealth };
  const impl: Record<string, unknown> = {};
  for (const name of Object.keys(CLIENT_METHODS) as ClientMethodName[]) {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const binding = CLIENT_METHODS[name] as ClientMethodBinding<ClientMethodName, any>;
    impl[name] = async (req: never, ctx: HandlerContext) => {
      try {
        // What a binary request carries that the schema does not have is refused by name where the
        // JSON route refuses unknown keys (RegisterFunction), never dropped.
        if (binding.strictFields) {
          const unknown = unknownFieldPaths(IronflowService.method[name].input, req as Message);
          if (unknown.length > 0) throw new EngineError('VALIDATION_ERROR', `unknown field(s), not options of this engine: ${unknown.join(', ')}`);
        }
        const result = await binding.call(deps, callScope(ctx), req);
        return binding.toMessage(result);
      } catch (err) {
        if (!isEngineError(err) && !(err instanceof ConnectError)) {
          options.onError?.(err, IronflowService.method[name].name);
        }
        throw toConnectError(err);
      }
    };
  }
  return impl as ServiceImpl<typeof IronflowService>;
}
