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

/** Checks a name-like string (event names, idempotency keys): non-empty, at most `max` characters. */
export function checkName(what: string, value: unknown, max: number): string {
  if (typeof value !== 'string' || value.trim() === '') throw new EngineError('VALIDATION_ERROR', `${what}: a non-empty string is required`);
  if (value.length > max) throw new EngineError('VALIDATION_ERROR', `${what}: at most ${max} characters`);
  return value.trim();
}
