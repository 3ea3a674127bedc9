import { createHash } from 'node:crypto';
import { CallScope, EngineError } from '@ironflow/contracts';
import { DebounceRow, EventRecord, FunctionRecord, RunRecord, Tx, debouncesSql, eventsSql, functionsSql, runsSql } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { eventDataKey } from './json-path';
import { refuseNul } from './payload-limits';
import { newRunOf } from './new-run';
import { announceNewRuns } from './new-runs-announcer';
import { EngineResources } from './resources';

/**
 * Debounce (WIRE-PROTOCOL.md 5.3; DESIGN.md `scheduler`): an event that a debounced function's
 * trigger accepts starts no run; it becomes its function and key's pending event (`defer`, in the
 * trigger's unit of work). The scheduler's pass starts one run, with the last pending event, once
 * the window closed: `periodMs` without a further event, or `maxWaitMs` after its first event.
 * Taking a window is one guarded delete (still due), so of several schedulers one starts the run,
 * and the run is unique per function and event besides.
 */
export class DebounceSystem {
  constructor(private readonly r: EngineResources, private readonly hints: DispatchHints) {}

  /**
   * Makes `event` the pending event of `fn` (which has `debounce`) for its key. `sync` (a
   * TriggerSync) throws `FUNCTION_DEBOUNCED` instead, so the caller's unit of work rolls back and
   * commits nothing: a synchronous caller cannot wait for a window to close.
   */
  async defer(tx: Tx, fn: FunctionRecord, event: EventRecord, sync: boolean): Promise<void> {
    const debounce = fn.definition.debounce!;
    if (sync) {
      throw new EngineError('FUNCTION_DEBOUNCED', `function ${fn.definition.id} is debounced: its runs start when a quiet period ends, so TriggerSync cannot wait for them; use Trigger`);
    }
    const key = debounce.key ? eventDataKey(event.data, debounce.key) : '';
    // Stored as text: U+0000 is refused on every store alike (VALIDATION_ERROR; the unit of work rolls back).
    refuseNul(`debounce key ${debounce.key}`, key);
    await debouncesSql.pushEvent(tx, {
      project: event.project,
      env: event.env,
      functionId: fn.definition.id,
      key: boundedKey(key),
      eventId: event.id,
      periodMs: debounce.periodMs,
      ...(debounce.maxWaitMs !== undefined ? { maxWaitMs: debounce.maxWaitMs } : {}),
    });
  }

  /** One pass over the closed windows (a page of `passPageSize`). Returns how many runs it started. */
  async pass(): Promise<number> {
    const due = await this.r.store.read('listDueDebounces', (tx) => debouncesSql.listDue(tx, this.r.config.passPageSize));
    let started = 0;
    for (const window of due) {
      try {
        if (await this.start(window)) started += 1;
      } catch (err) {
        this.r.logger.warn('debounced run failed to start; the next pass retries it', { function_id: window.functionId, error: String(err) });
      }
    }
    return started;
  }

  private async start(due: DebounceRow): Promise<boolean> {
    const run = await this.r.store.unitOfWork('startDebouncedRun', async (tx): Promise<RunRecord | null> => {
      const window = await debouncesSql.takeDue(tx, due.project, due.env, due.functionId, due.key);
      if (!window) return null;
      const scope: CallScope = { project: window.project, env: window.env };
      const fn = await functionsSql.getFunction(tx, scope.project, scope.env, window.functionId);
      const event = await eventsSql.getEvent(tx, window.eventId);
      if (!fn || !event) return null; // the function was deleted: its window closes with no run
      return runsSql.insertRun(tx, newRunOf(scope, fn, event.id, event.data));
    });
    if (!run) return false;
    announceNewRuns(this.r, this.hints, [run]);
    return true;
  }
}

/** A key longer than 200 characters is stored as its SHA-256 (`sha256:<hex>`), so any value fits the key's index. */
function boundedKey(key: string): string {
  return key.length <= 200 ? key : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}
