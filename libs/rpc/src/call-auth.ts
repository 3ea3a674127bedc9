/**
 * Authentication at the edge of the HTTP/2 side (Connect, gRPC, gRPC-Web): one interceptor on the
 * router checks every call once, before its handler runs and before a stream's first message
 * is read, and hands the call's scope to the handler through a context value.
 */
import { createContextKey, type HandlerContext, type Interceptor } from '@connectrpc/connect';
import type { CallScope } from '@ironflow/contracts';
import { toConnectError } from './errors';
import { scopeFromHeaders } from './scope';

/**
 * Authenticates a call from its request headers and resolves to its scope. Throws `EngineError`
 * `UNAUTHENTICATED` / `PERMISSION_DENIED` (sent as Connect `unauthenticated` /
 * `permission_denied`, HTTP 401 / 403) or `VALIDATION_ERROR` for a bad env header.
 */
export type Authenticate = (headers: Headers) => Promise<CallScope>;

/** An open server's authentication: project `default`, env from `X-Ironflow-Environment`. */
export const openAuthentication: Authenticate = async (headers) => scopeFromHeaders(headers);

const CALL_SCOPE = createContextKey<CallScope | undefined>(undefined, { description: 'ironflow call scope' });

/** The interceptor that runs `authenticate` for every call on the router and stores the scope. */
export function authInterceptor(authenticate: Authenticate): Interceptor {
  return (next) => async (req) => {
    try {
      req.contextValues.set(CALL_SCOPE, await authenticate(req.header));
    } catch (err) {
      throw toConnectError(err);
    }
    return next(req);
  };
}

/**
 * The scope {@link authInterceptor} stored for this call. Throws when the router has no such
 * interceptor: a handler never falls back to an unauthenticated scope.
 */
export function callScope(ctx: HandlerContext): CallScope {
  const scope = ctx.values.get(CALL_SCOPE);
  if (!scope) throw new Error('no call scope: the router was built without authInterceptor');
  return scope;
}
