import { FunctionDefinition } from '@ironflow/contracts';
import { valueAtPath } from './json-path';

/**
 * A new run's lane (DESIGN.md "concurrency_lanes"): the function's `concurrency.limit` and the
 * value of `concurrency.key` (a JSON path such as `event.data.customerId` or `data.customerId`)
 * in the run's input. No limit → no lane; a key that resolves to nothing → the function's
 * shared lane.
 */
export function laneFields(definition: FunctionDefinition, input: unknown): { concurrencyKey: string | null; concurrencyLimit: number | null } {
  const concurrency = definition.concurrency;
  if (!concurrency || !(concurrency.limit > 0)) return { concurrencyKey: null, concurrencyLimit: null };
  if (!concurrency.key) return { concurrencyKey: null, concurrencyLimit: concurrency.limit };
  const value = valueAtPath({ event: { data: input }, data: input }, concurrency.key);
  return {
    concurrencyKey: value === undefined || value === null ? null : typeof value === 'string' ? value : JSON.stringify(value),
    concurrencyLimit: concurrency.limit,
  };
}
