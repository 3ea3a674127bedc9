import { IronflowError } from './errors';

/**
 * Refuses the keys of `options` that `known` does not name, so a misspelt option (`serverURL`,
 * `pollInterval`, a wait's `mach`) is an error instead of a default silently taken in its place.
 * Throws `IronflowError` (code `VALIDATION_ERROR` unless `code` says otherwise, not retryable):
 * `<what>: unknown option(s), not options of this SDK: a, b`. `nested` adds keys already found
 * deeper, named with their path (`debounce.maxWait`).
 */
export function refuseUnknownOptions(
  what: string,
  options: object | null | undefined,
  known: ReadonlySet<string>,
  { nested = [], code = 'VALIDATION_ERROR' }: { nested?: readonly string[]; code?: string } = {},
): void {
  const unknown = [...(options && typeof options === 'object' ? Object.keys(options).filter((key) => !known.has(key)) : []), ...nested];
  if (unknown.length > 0) throw new IronflowError(`${what}: unknown option(s), not options of this SDK: ${unknown.join(', ')}`, { code, retryable: false });
}
