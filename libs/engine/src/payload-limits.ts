import { EngineError } from '@ironflow/contracts';

/** Deepest nesting accepted in event data and inputs: a protobuf Struct allows 100 levels with its wrappers. */
export const MAX_JSON_DEPTH = 64;

/**
 * Checks a JSON payload before anything is written: nesting at most `MAX_JSON_DEPTH` (measured
 * without recursion, so a hostile payload cannot overflow the stack) and serialized size at most
 * `maxBytes`. Throws `VALIDATION_ERROR` or `PAYLOAD_TOO_LARGE`. `what` names it in the message.
 */
export function checkPayload(what: string, value: unknown, maxBytes: number): void {
  const stack: { v: unknown; depth: number }[] = [{ v: value, depth: 1 }];
  while (stack.length) {
    const { v, depth } = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) throw new EngineError('VALIDATION_ERROR', `${what} nests deeper than ${MAX_JSON_DEPTH} levels`);
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push({ v: child, depth: depth + 1 });
  }
  const size = Buffer.byteLength(JSON.stringify(value ?? {}));
  if (size > maxBytes) throw new EngineError('PAYLOAD_TOO_LARGE', `${what} is ${size} bytes; the limit is ${maxBytes}`);
}

/**
 * Checks a name-like string (event names, idempotency keys): non-empty, at most `max` characters,
 * no U+0000 (see {@link refuseNul}). Returns it trimmed: names are normalised the same wherever
 * they enter (emit, registration, yields).
 */
export function checkName(what: string, value: unknown, max: number): string {
  if (typeof value !== 'string' || value.trim() === '') throw new EngineError('VALIDATION_ERROR', `${what}: a non-empty string is required`);
  if (value.length > max) throw new EngineError('VALIDATION_ERROR', `${what}: at most ${max} characters`);
  refuseNul(what, value);
  return value.trim();
}

/**
 * Refuses U+0000 in a string the store keeps as text (a name, an id, a key): PostgreSQL cannot hold
 * it, SQLite would, so the engine refuses it on both, before anything is written. Throws
 * `VALIDATION_ERROR` naming `what`. JSON values (event data, outputs) may hold it: they are
 * stored escaped.
 */
export function refuseNul(what: string, value: unknown): void {
  if (typeof value === 'string' && value.includes('\u0000')) throw new EngineError('VALIDATION_ERROR', `${what}: U+0000 (NUL) is not allowed`);
}

/**
 * {@link refuseNul} over every string and object key of `value` (iteratively, so depth cannot
 * overflow the stack); the error names the first offending path under `what`.
 */
export function refuseNulAnywhere(what: string, value: unknown): void {
  const stack: { v: unknown; path: string }[] = [{ v: value, path: what }];
  while (stack.length) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') refuseNul(path, v);
    else if (Array.isArray(v)) v.forEach((item, i) => stack.push({ v: item, path: `${path}.${i}` }));
    else if (v !== null && typeof v === 'object') {
      for (const [k, item] of Object.entries(v)) {
        refuseNul(`${path} key`, k);
        stack.push({ v: item, path: `${path}.${k}` });
      }
    }
  }
}
