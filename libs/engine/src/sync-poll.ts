import { RunRecord, Store, runsSql } from '@ironflow/store';

interface Watch {
  runIds: string[];
  /** The poll's tick count when the watch began: it is polled from the second tick after it. */
  since: number;
  onEnded(runs: RunRecord[]): void;
  onFailed(err: unknown): void;
}

/**
 * The store poll of the sync calls (TriggerSync, InvokeFunctionSync) waiting in this process: one
 * read every `periodMs` (`syncPollMs`, default 100) for all of them, not one per call (issue 11),
 * of the runs that have ended among theirs (`runsSql.getEndedRuns`: a running run is not read).
 * It is the fallback of the RESULTS frames ({@link ResultWaiters}): a lost frame costs latency,
 * never the result. A call's runs are polled from the second tick after it began to wait
 * (100–200 ms later: most calls have their frame by then and are never polled; calls that began
 * between the same two ticks are polled together), then at every tick. At most one read is in
 * flight: a tick that comes during a read is skipped. A failed read fails each call it polled
 * (`onFailed`), as the call's own read would have. The timer runs only while calls wait.
 */
export class SyncPoll {
  /** In the order they began, so the ones due come first. */
  private readonly watches = new Set<Watch>();
  private timer?: NodeJS.Timeout;
  /** Ticks so far. */
  private ticks = 0;
  private reading = false;

  constructor(
    private readonly store: Store,
    /** ms between polls (`syncPollMs`). */
    private readonly periodMs: number,
  ) {}

  /**
   * Polls `runIds` until the returned function is called: `onEnded` gets the runs a poll found
   * ended (each time, until the watch ends), `onFailed` the error of a read that failed.
   */
  watch(runIds: string[], onEnded: (runs: RunRecord[]) => void, onFailed: (err: unknown) => void): () => void {
    const watch: Watch = { runIds, since: this.ticks, onEnded, onFailed };
    this.watches.add(watch);
    this.timer ??= setInterval(() => void this.poll(), this.periodMs);
    return () => {
      this.watches.delete(watch);
      if (this.watches.size > 0) return;
      clearInterval(this.timer);
      this.timer = undefined;
    };
  }

  private async poll(): Promise<void> {
    this.ticks += 1;
    if (this.reading) return;
    const due: Watch[] = [];
    for (const watch of this.watches) {
      if (this.ticks - watch.since < 2) break;
      due.push(watch);
    }
    if (due.length === 0) return;
    this.reading = true;
    let byId: Map<string, RunRecord>;
    try {
      const ids = [...new Set(due.flatMap((watch) => watch.runIds))];
      byId = new Map((await this.store.read('readSyncRuns', (tx) => runsSql.getEndedRuns(tx, ids))).map((run) => [run.id, run]));
    } catch (err) {
      for (const watch of due) if (this.watches.has(watch)) watch.onFailed(err);
      return;
    } finally {
      this.reading = false;
    }
    for (const watch of due) {
      if (!this.watches.has(watch)) continue;
      const ended = watch.runIds.map((id) => byId.get(id)).filter((run): run is RunRecord => run !== undefined);
      if (ended.length > 0) watch.onEnded(ended);
    }
  }
}
