import { EngineError } from '@ironflow/contracts';

/**
 * Parses a raw request body as JSON. Empty → `{}`. Throws `INVALID_JSON` (400) for a body that
 * is not JSON and `VALIDATION_ERROR` for JSON that is not an object.
 */
export function parseJsonBody<T = Record<string, unknown>>(raw: unknown): T {
  const text = Buffer.isBuffer(raw) ? raw.toString('utf8') : typeof raw === 'string' ? raw : '';
  if (text.trim() === '') return {} as T;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new EngineError('INVALID_JSON', `request body is not JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new EngineError('VALIDATION_ERROR', 'request body must be a JSON object');
  return value as T;
}
