import { Store, cancelOnSql } from '@ironflow/store';

interface Waiting {
  key: cancelOnSql.SpecKey;
  resolve(paths: (string | null)[]): void;
  reject(err: unknown): void;
}

/**
 * The first read of every live `cancel_on` match: which `match` paths the specs of an event's name
 * have (none, for almost every event). A match asked for while no read is under way reads at once;
 * the matches asked for while one is share the next, which starts as it ends (issue 11: a
 * dispatcher committing triggers at 64 in flight sent this read once per event, a third of its
 * statements for a one-step run). Each match still reads after its own event's commit (its read
 * starts after it asked, and it asks after the commit), so an event and a run committed at the same
 * time cannot miss each other.
 */
export class CancelOnPathReads {
  private waiting: Waiting[] = [];
  private reading = false;

  constructor(private readonly store: Store) {}

  /**
   * The distinct `match` paths of the specs waiting for events named `key.eventName` in
   * `key.project`/`key.env` (`null` for a spec without a path; empty when none waits). Rejects
   * with the store's error, as every match of the shared read does.
   */
  pathsOf(key: cancelOnSql.SpecKey): Promise<(string | null)[]> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ key, resolve, reject });
      if (!this.reading) void this.read();
    });
  }

  /** Reads for every match waiting, then again for those that asked meanwhile, until none waits. */
  private async read(): Promise<void> {
    this.reading = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting;
      this.waiting = [];
      try {
        const paths = await this.store.read('cancelOnPaths', (tx) => cancelOnSql.listMatchPaths(tx, batch.map((w) => w.key)));
        for (const w of batch) w.resolve(paths.get(cancelOnSql.specKeyOf(w.key)) ?? []);
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    this.reading = false;
  }
}
