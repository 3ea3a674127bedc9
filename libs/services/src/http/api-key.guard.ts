import type { IncomingMessage } from 'node:http';
import { CanActivate, ExecutionContext, Inject, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import type { CallScope } from '@ironflow/contracts';
import type { ApiKeySystem } from '@ironflow/engine';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

const PUBLIC_ROUTE = 'ironflow:public-route';
const ADMIN_ROUTE = 'ironflow:admin-route';
/** Where the guard leaves the call's scope on the request; read it with `scopeOf(req)`. */
export const CALL_SCOPE = Symbol('ironflow.callScope');

/** Marks a controller or handler that answers without an API key (`/health`, `/ready`, `/metrics`). */
export const PublicRoute = () => SetMetadata(PUBLIC_ROUTE, true);
/** Marks a key-management route: only the admin key (`IRONFLOW_ADMIN_KEY`) passes; without one configured, anyone while the server is open. */
export const AdminRoute = () => SetMetadata(ADMIN_ROUTE, true);

/** The scope of a call from fetch-style headers (`Authorization`, `X-Ironflow-Environment`); see `ApiKeySystem.authenticate`. */
export function authenticateHeaders(apiKeys: ApiKeySystem, headers: Headers): Promise<CallScope> {
  return apiKeys.authenticate({ authorization: headers.get('authorization'), environment: headers.get('x-ironflow-environment') });
}

/**
 * The scope of an HTTP/1 call from its `Authorization` and `X-Ironflow-Environment` headers (what
 * {@link ApiKeyGuard} checks on every route that is not public or admin); see `ApiKeySystem.authenticate`.
 */
export function authenticateRequest(apiKeys: ApiKeySystem, req: IncomingMessage): Promise<CallScope> {
  const header = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  return apiKeys.authenticate({ authorization: header('authorization'), environment: header('x-ironflow-environment') });
}

/**
 * The scope of a subscription WebSocket (`<base>/ws`) from its upgrade request: the key from
 * `Authorization: Bearer`, else the `token` query parameter (what the SDK's browser and Node
 * subscribers send), the env from the `env` query parameter, else `X-Ironflow-Environment`.
 * Throws like `ApiKeySystem.authenticate`; the gateway answers the error's status before upgrading.
 */
export function authenticateSubscription(apiKeys: ApiKeySystem, req: IncomingMessage): Promise<CallScope> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const header = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const token = url.searchParams.get('token');
  return apiKeys.authenticate({
    authorization: header('authorization') ?? (token ? `Bearer ${token}` : null),
    environment: url.searchParams.get('env') ?? header('x-ironflow-environment') ?? null,
  });
}

/**
 * The API key check of every HTTP/1 route (issue 9, item 7), once per call at the edge: REST,
 * Connect unary JSON and the REST worker routes. A global guard (`APP_GUARD`), so a controller
 * added later is covered unless it opts out:
 *
 * - default: `ApiKeySystem.authenticate` (Authorization: Bearer, X-Ironflow-Environment) and the
 *   resulting `CallScope` left on the request for `scopeOf(req)`; refusals are `UNAUTHENTICATED`
 *   (401) and `PERMISSION_DENIED` (403), answered as `{"code","message"}` on REST routes and as
 *   Connect errors (`unauthenticated`, `permission_denied`) on `/ironflow.v1.*` routes;
 * - `@PublicRoute()`: no check;
 * - `@AdminRoute()`: `ApiKeySystem.authenticateAdmin` (no scope).
 *
 * Only HTTP contexts are checked: the audit-writer's NATS handlers are internal.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    @Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime,
    private readonly reflector: Reflector,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)) return true;
    const req = context.switchToHttp().getRequest<Request & { [CALL_SCOPE]?: CallScope }>();
    const apiKeys = this.runtime.engine.apiKeys;
    if (this.reflector.getAllAndOverride<boolean>(ADMIN_ROUTE, targets)) {
      await apiKeys.authenticateAdmin(req.header('authorization'));
      return true;
    }
    req[CALL_SCOPE] = await authenticateRequest(apiKeys, req);
    return true;
  }
}
