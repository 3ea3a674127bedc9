/**
 * Reads `a.b.c` from a JSON value (WIRE-PROTOCOL.md 1.5 `match`): own properties only (so
 * `constructor` or `__proto__` read nothing), array elements by index; `undefined` when a segment
 * is missing.
 */
export function valueAtPath(value: unknown, path: string): unknown {
  let current: unknown = value;
  for (const key of path.split('.')) {
    if (current === null || typeof current !== 'object' || !Object.prototype.hasOwnProperty.call(current, key)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/**
 * Why `path` cannot be read as a dotted path (a function option's `concurrency.key`,
 * `debounce.key`, `cancelOn[].match`, a wait's `match`): `undefined` when it is one or more
 * non-empty names joined by single dots (`data.customerId`); else the reason. An empty path would
 * be taken for no path (leave the option out instead), and an empty name (`data..x`, `.x`, `x.`)
 * reads nothing in any event.
 */
export function dataPathProblem(path: string): string | undefined {
  if (path === '') return 'an empty path (leave it out for none)';
  if (path.split('.').includes('')) return `${JSON.stringify(path)} has an empty name between dots (a path is names joined by single dots, e.g. data.customerId)`;
  return undefined;
}

/**
 * JSON text of a value with object keys sorted at every level, so two values that are equal as
 * JSON give the same text whatever their key order (`{"a":1,"b":2}` for `{b: 2, a: 1}`).
 * `undefined` inside arrays becomes `null` and inside objects is dropped, as `JSON.stringify` does.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    return Object.fromEntries(Object.keys(v as object).sort().map((k) => [k, (v as Record<string, unknown>)[k]]));
  });
}

/**
 * What a key path of a function option (`debounce.key`, `concurrency.key`) reads in an event's
 * data: the path may start at the event (`event.data.customerId`), at its data (`data.customerId`)
 * or inside the data (`customerId`); `undefined` when it reads nothing.
 */
export function valueAtEventDataPath(data: unknown, path: string): unknown {
  return path.startsWith('event.') || path.startsWith('data.') ? valueAtPath({ event: { data }, data }, path) : valueAtPath(data, path);
}

/**
 * The key a JSON path picks out of an event's data, as text (WIRE-PROTOCOL.md 5.3 `debounce.key`),
 * read by {@link valueAtEventDataPath}. A string is itself, another value its JSON; nothing → `''`.
 */
export function eventDataKey(data: unknown, path: string): string {
  const value = valueAtEventDataPath(data, path);
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}
