import type { Request } from 'express';
import { CallScope } from '@ironflow/contracts';

/** Project is `default` until API keys exist; env from `X-Ironflow-Environment`, else `default`. */
export function scopeOf(req: Request): CallScope {
  const env = req.header('x-ironflow-environment');
  return { project: 'default', env: env && env.trim() !== '' ? env.trim() : 'default' };
}
