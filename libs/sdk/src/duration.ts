import ms from 'ms';

/**
 * A duration: milliseconds as a number, or a string the `ms` package parses
 * (`"500ms"`, `"2s"`, `"1.5h"`, `"7d"`, `"2 minutes"`; a bare `"100"` is 100 ms).
 */
export type Duration = number | string;

/**
 * Converts a {@link Duration} to milliseconds.
 * Throws `RangeError` when a string cannot be parsed or a number is not finite.
 */
export function toMs(duration: Duration): number {
  let value: number | undefined;
  if (typeof duration === 'number') value = duration;
  else {
    try {
      value = ms(duration) as number | undefined;
    } catch {
      value = undefined;
    }
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new RangeError(`invalid duration: ${JSON.stringify(duration)}`);
  }
  return value;
}

const UNITS: [suffix: string, size: number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
];

/**
 * Formats milliseconds in the largest whole unit, floored, as the wire's duration strings
 * (WIRE-PROTOCOL.md 1.5): `90000` → `"1m"`, `86400000` → `"1d"`, `1500` → `"1s"`, `250` → `"250ms"`.
 * Sub-millisecond parts are floored too (`0.5` → `"0ms"`; callers reject values ≤ 0 first).
 */
export function formatDuration(milliseconds: number): string {
  for (const [suffix, size] of UNITS) {
    if (milliseconds >= size) return `${Math.floor(milliseconds / size)}${suffix}`;
  }
  return `${Math.floor(milliseconds)}ms`;
}
