import { EngineError } from '@ironflow/contracts';

/**
 * Refuses, with `VALIDATION_ERROR` naming each, the keys of `input` (a JSON body or a request's
 * query) not in `known`: what a route does not act on is not silently dropped. `what` leads the
 * message (`unknown query parameter(s): wait (this route takes available)`); a route that takes
 * no key says `none`.
 */
export function refuseUnknownKeys(what: string, input: Record<string, unknown>, known: readonly string[]): void {
  const unknown = Object.keys(input).filter((k) => !known.includes(k));
  if (unknown.length > 0) throw new EngineError('VALIDATION_ERROR', `${what}: ${unknown.join(', ')} (this route takes ${known.length > 0 ? known.join(', ') : 'none'})`);
}
