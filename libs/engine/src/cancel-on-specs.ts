import { CancelOnSpec } from '@ironflow/contracts';
import { CancelOnSpecRow } from '@ironflow/store';
import { CelPrograms } from './cel-programs';
import { valueAtPath } from './json-path';

/**
 * The value a `cancelOn` or concurrency `match` path reads: the same extraction rules for a run's
 * input and an event's data (`data.orderId` or `event.data.orderId`), as JSON text so two values
 * compare structurally. A path that reads nothing gives `null`.
 */
export function matchValueAt(data: unknown, path: string): string {
  return JSON.stringify(valueAtPath({ event: { data }, data }, path) ?? null);
}

/** The programs of `cancelOn[].if` conditions: variables `event` (the run's own event) and `async` (the cancel event). */
export const cancelOnConditions = new CelPrograms(['event', 'async']);

/** The `cancel_on_specs` rows of a new run of a function declaring `specs`, with `input`. */
export function cancelOnSpecRows(runId: string, specs: CancelOnSpec[], input: unknown): CancelOnSpecRow[] {
  return specs.map((spec, specIndex) => ({
    runId,
    specIndex,
    eventName: spec.event,
    matchPath: spec.match ?? null,
    matchValue: spec.match ? matchValueAt(input, spec.match) : null,
    condition: spec.if ?? null,
  }));
}
