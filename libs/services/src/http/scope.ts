import type { Request } from 'express';
import { CallScope, parseEnvironment } from '@ironflow/contracts';

/**
 * Project is `default` until API keys exist; env from `X-Ironflow-Environment`, else `default`.
 * Throws `VALIDATION_ERROR` (400) for an env name that cannot stand in a NATS subject.
 */
export function scopeOf(req: Request): CallScope {
  return { project: 'default', env: parseEnvironment(req.header('x-ironflow-environment')) };
}
