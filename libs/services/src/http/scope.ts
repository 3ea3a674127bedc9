import type { Request } from 'express';
import { CallScope } from '@ironflow/contracts';
import { CALL_SCOPE } from './api-key.guard';

/**
 * The scope `ApiKeyGuard` gave this call: the API key's project and env when keys are required,
 * else project `default` and env from `X-Ironflow-Environment` (else `default`). Throws when the
 * guard did not run, so no route ever falls back to an unauthenticated scope.
 */
export function scopeOf(req: Request): CallScope {
  const scope = (req as Request & { [CALL_SCOPE]?: CallScope })[CALL_SCOPE];
  if (!scope) throw new Error(`no call scope for ${req.method} ${req.path}: ApiKeyGuard did not run`);
  return scope;
}
