import { canonicalJson, valueAtEventDataPath } from './json-path';

/**
 * `waitForEvent` matching (WIRE-PROTOCOL.md 1.5 `match`, issue 7 item 11): an incoming event
 * satisfies a wait when its value at the `match` path equals, as JSON, the waiting run's own event
 * value at that path — compared structurally (object key order does not matter). The path reads
 * each side's event data as `debounce.key` and `cancelOn` read it (`data.requestId`,
 * `event.data.requestId` or `requestId`). A path that is missing on the waiting side matches
 * nothing; one missing on the incoming event does not match (JSON `null` matches only `null`).
 */

/** What a correlation stores for the waiting side: canonical JSON of its value, `null` when the path is missing there. */
export function waitingMatchValue(runEventData: unknown, matchPath: string): string | null {
  const value = valueAtEventDataPath(runEventData, matchPath);
  return value === undefined ? null : canonicalJson(value);
}

/** Whether `event` (a wire event object) satisfies a wait stored as (`matchPath`, `matchValue`); no path → any event of the name. */
export function eventSatisfiesWait(event: unknown, matchPath: string | null, matchValue: string | null): boolean {
  if (matchPath === null) return true;
  if (matchValue === null) return false;
  const value = valueAtEventDataPath((event as { data?: unknown } | null)?.data, matchPath);
  return value !== undefined && canonicalJson(value) === matchValue;
}
