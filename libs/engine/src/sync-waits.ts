import { EngineError } from '@ironflow/contracts';
import { RunRecord } from '@ironflow/store';

/**
 * The sync calls (TriggerSync, InvokeFunctionSync) waiting for outcomes, and the drain that ends
 * them (README "Shutdown"). Once `drain(deadline)` was called, a new sync call is refused with
 * `UNAVAILABLE` before it starts anything (it can be retried on another replica as it is), and a
 * call already waiting keeps waiting until its runs end or `deadline` passes, then answers
 * `UNAVAILABLE` naming the runs still going ({@link drainedError}).
 */
export class SyncWaits {
  private waiting = 0;
  private deadline?: number;
  /** The drain deadline's timer ran. */
  private passed = false;
  private idleWaiters: (() => void)[] = [];
  /** The calls' `onDrainDeadline` callbacks, called when the drain deadline passes. */
  private readonly deadlineWaiters = new Set<() => void>();
  private deadlineTimer?: NodeJS.Timeout;

  /**
   * Registers a sync call; call the returned `end` when it answered. `onDrainDeadline` is called
   * once, when the drain deadline passes while the call waits (it then answers; a call busy
   * elsewhere at that moment finds {@link deadlinePassed} true when it next looks). Throws
   * `UNAVAILABLE` while draining.
   */
  begin(onDrainDeadline?: () => void): () => void {
    if (this.deadline !== undefined) throw new EngineError('UNAVAILABLE', 'the engine is shutting down: retry the call (another replica takes it)');
    this.waiting += 1;
    if (onDrainDeadline) this.deadlineWaiters.add(onDrainDeadline);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (onDrainDeadline) this.deadlineWaiters.delete(onDrainDeadline);
      this.waiting -= 1;
      if (this.waiting === 0) {
        clearTimeout(this.deadlineTimer);
        for (const resolve of this.idleWaiters.splice(0)) resolve();
      }
    };
  }

  /**
   * True once the drain deadline passed: its timer ran. The calls test this, not `Date.now()`
   * against the deadline: a timer runs on the monotonic clock and may run while the wall clock
   * still reads a millisecond (or, stepped back, more) before the deadline, and it runs once.
   */
  get deadlinePassed(): boolean {
    return this.passed;
  }

  /** Starts the drain: sync calls in flight answer by `deadline` (epoch ms); new ones are refused. */
  drain(deadline: number): void {
    this.deadline = Math.min(this.deadline ?? Infinity, deadline);
    clearTimeout(this.deadlineTimer);
    if (this.waiting === 0) return;
    this.deadlineTimer = setTimeout(() => {
      this.passed = true;
      for (const onDeadline of [...this.deadlineWaiters]) onDeadline();
    }, Math.max(0, this.deadline - Date.now()));
  }

  /** Resolves when no sync call is waiting. */
  idle(): Promise<void> {
    if (this.waiting === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

/**
 * The answer of a sync call still waiting at the drain deadline: `UNAVAILABLE` (Connect
 * `unavailable`, HTTP 503, which clients retry) whose message names each run still going and its
 * status, with `details.runIds` (and `details.eventId` for TriggerSync). Retrying TriggerSync with
 * the same idempotency key waits for the same runs; else read them with GetRun.
 */
export function drainedError(runs: RunRecord[], eventId?: string): EngineError {
  const going = runs.map((run) => `run ${run.id} (${run.functionId}) is ${run.status}`).join('; ');
  return new EngineError('UNAVAILABLE', `the engine is shutting down before the outcome: ${going}; read it with GetRun, or retry with the same idempotency key`, {
    runIds: runs.map((run) => run.id),
    ...(eventId ? { eventId } : {}),
  });
}
