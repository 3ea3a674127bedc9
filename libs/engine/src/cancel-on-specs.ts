import { CancelOnSpec } from '@ironflow/contracts';
import { CancelOnSpecRow } from '@ironflow/store';
import { CelPrograms } from './cel-programs';
import { valueAtEventDataPath } from './json-path';

/**
 * The value a `cancelOn` `match` path reads, with the same rules for a run's input and an event's
 * data, as `debounce.key` reads it (`orderId`, `data.orderId` or `event.data.orderId`), as JSON
 * text so two values compare as text. A path that reads nothing gives `null`, which matches
 * nothing: neither a run without the value nor an event without it is part of a match (JSON
 * `null` is a value, and matches only `null`), as a `waitForEvent` match.
 */
export function matchValueAt(data: unknown, path: string): string | null {
  const value = valueAtEventDataPath(data, path);
  return value === undefined ? null : JSON.stringify(value);
}

/** Whether a spec (`matchPath`, `matchValue`) matches an event with `data`: no path → any event of the name; else equal values, neither missing. */
export function specMatches(spec: { matchPath: string | null; matchValue: string | null }, data: unknown): boolean {
  if (spec.matchPath === null) return true;
  return spec.matchValue !== null && matchValueAt(data, spec.matchPath) === spec.matchValue;
}

/** The programs of `cancelOn[].if` conditions: variables `event` (the run's own event) and `async` (the cancel event). */
export const cancelOnConditions = new CelPrograms(['event', 'async']);

/** The `cancel_on_specs` rows of a new run of a function declaring `specs`, with `input`. */
export function cancelOnSpecRows(runId: string, specs: CancelOnSpec[], input: unknown): CancelOnSpecRow[] {
  return specs.map((spec, specIndex) => ({
    runId,
    specIndex,
    eventName: spec.event,
    matchPath: spec.match ?? null,
    matchValue: spec.match ? matchValueAt(input, spec.match) : null,
    condition: spec.if ?? null,
  }));
}
