import { IronflowError } from './errors';

/**
 * Refuses the keys of `options` that `known` does not name, so a misspelt option (`serverURL`,
 * `pollInterval`) is an error instead of a default silently taken in its place. Throws
 * `IronflowError` code `VALIDATION_ERROR`: `<what>: unknown option(s), not options of this SDK: a, b`.
 * `unknownNested` adds keys already found deeper (named with their path, e.g. `debounce.maxWait`).
 */
export function refuseUnknownOptions(what: string, options: object | null | undefined, known: ReadonlySet<string>, unknownNested: readonly string[] = []): void {
  const unknown = [...(options ? Object.keys(options).filter((key) => !known.has(key)) : []), ...unknownNested];
  if (unknown.length > 0) throw new IronflowError(`${what}: unknown option(s), not options of this SDK: ${unknown.join(', ')}`, { code: 'VALIDATION_ERROR' });
}
