import { FunctionDefinition } from '@ironflow/contracts';
import { valueAtEventDataPath } from './json-path';
import { refuseNul } from './payload-limits';

/**
 * A new run's lane (DESIGN.md "concurrency_lanes"): the function's `concurrency.limit` and the
 * value of `concurrency.key` in the run's input, read as `debounce.key` is (`event.data.customerId`,
 * `data.customerId` or `customerId`). No limit → no lane; a key that resolves to nothing → the
 * function's shared lane. Throws `VALIDATION_ERROR` when the key's value holds U+0000 (the store keeps it as text).
 */
export function laneFields(definition: FunctionDefinition, input: unknown): { concurrencyKey: string | null; concurrencyLimit: number | null } {
  const concurrency = definition.concurrency;
  if (!concurrency || !(concurrency.limit > 0)) return { concurrencyKey: null, concurrencyLimit: null };
  if (!concurrency.key) return { concurrencyKey: null, concurrencyLimit: concurrency.limit };
  const value = valueAtEventDataPath(input, concurrency.key);
  const concurrencyKey = value === undefined || value === null ? null : typeof value === 'string' ? value : JSON.stringify(value);
  refuseNul(`concurrency key ${concurrency.key}`, concurrencyKey);
  return { concurrencyKey, concurrencyLimit: concurrency.limit };
}
