import { setImmediate as nextTurn } from 'node:timers';
import { Store, cancelOnSql } from '@ironflow/store';

interface Waiting {
  key: cancelOnSql.SpecKey;
  resolve(paths: (string | null)[]): void;
  reject(err: unknown): void;
}

/**
 * The first read of every live `cancel_on` match: which `match` paths the specs of an event's name
 * have (none, for almost every event). The matches asked for within one turn of the event loop
 * share one read, made at the turn's end (issue 11: a dispatcher committing triggers at 64 in
 * flight sent this read once per event, a third of its statements for a one-step run). Each match
 * still reads after its own event's commit (it asks after the commit; the read starts later), so
 * an event and a run committed at the same time cannot miss each other.
 */
export class CancelOnPathReads {
  private waiting: Waiting[] = [];

  constructor(private readonly store: Store) {}

  /**
   * The distinct `match` paths of the specs waiting for events named `key.eventName` in
   * `key.project`/`key.env` (`null` for a spec without a path; empty when none waits). Rejects
   * with the store's error, as every match of the shared read does.
   */
  pathsOf(key: cancelOnSql.SpecKey): Promise<(string | null)[]> {
    return new Promise((resolve, reject) => {
      if (this.waiting.push({ key, resolve, reject }) === 1) nextTurn(() => void this.read());
    });
  }

  private async read(): Promise<void> {
    const batch = this.waiting;
    this.waiting = [];
    try {
      const paths = await this.store.read('cancelOnPaths', (tx) => cancelOnSql.listMatchPaths(tx, batch.map((w) => w.key)));
      for (const w of batch) w.resolve(paths.get(cancelOnSql.specKeyOf(w.key)) ?? []);
    } catch (err) {
      for (const w of batch) w.reject(err);
    }
  }
}
