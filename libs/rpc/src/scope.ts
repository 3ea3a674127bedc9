import type { IncomingHttpHeaders } from 'node:http';
import { type CallScope, parseEnvironment } from '@ironflow/contracts';

/** Header naming the environment of a client call (WIRE-PROTOCOL.md section 6). */
export const ENVIRONMENT_HEADER = 'x-ironflow-environment';
export const DEFAULT_PROJECT = 'default';
export const DEFAULT_ENVIRONMENT = 'default';

/**
 * The scope of a client call: project `default` (API keys, which will name the project, come
 * later) and the environment from `X-Ironflow-Environment`, else `default` (empty or blank
 * values count as missing; a name that cannot stand in a subject throws `VALIDATION_ERROR`). The v0.29 streaming worker never sends the header.
 */
export function scopeFromHeaders(headers: Headers): CallScope {
  return { project: DEFAULT_PROJECT, env: parseEnvironment(headers.get(ENVIRONMENT_HEADER)) };
}

/**
 * Node's `IncomingHttpHeaders` (what Express/Nest hand a controller) as fetch `Headers`, so one
 * `scopeOf` serves both transports. Array values are joined with ", "; HTTP/2
 * pseudo-headers (`:path`…) are skipped.
 */
export function toFetchHeaders(headers: Headers | IncomingHttpHeaders): Headers {
  if (headers instanceof Headers) return headers;
  const out = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name.startsWith(':')) continue;
    out.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  return out;
}
