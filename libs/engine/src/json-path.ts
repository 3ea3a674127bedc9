/** Reads `a.b.c` from a JSON value; `undefined` when a segment is missing (WIRE-PROTOCOL.md 1.5 `match`). */
export function valueAtPath(value: unknown, path: string): unknown {
  let current: unknown = value;
  for (const key of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/**
 * The key a JSON path picks out of an event's data, as text (WIRE-PROTOCOL.md 5.3 `debounce.key`):
 * the path may start at the event (`event.data.customerId`), at its data (`data.customerId`) or
 * inside the data (`customerId`). A string is itself, another value its JSON; nothing → `''`.
 */
export function eventDataKey(data: unknown, path: string): string {
  const value = path.startsWith('event.') || path.startsWith('data.')
    ? valueAtPath({ event: { data }, data }, path)
    : valueAtPath(data, path);
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}
