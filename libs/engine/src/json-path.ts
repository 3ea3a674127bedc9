/** Reads `a.b.c` from a JSON value; `undefined` when a segment is missing (WIRE-PROTOCOL.md 1.5 `match`). */
export function valueAtPath(value: unknown, path: string): unknown {
  let current: unknown = value;
  for (const key of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}
