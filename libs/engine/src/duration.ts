import ms from 'ms';

/** Parses a wire duration (`"500ms"`, `"30s"`, `"1.5h"`, `"7d"`) or a number of ms; `undefined` when invalid. */
export function parseDurationMs(value: string | number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : undefined;
  const parsed = ms(value.trim());
  return typeof parsed === 'number' && Number.isFinite(parsed) && parsed >= 0 ? parsed : undefined;
}
