import { RunRecord, Store, runsSql } from '@ironflow/store';

/** Most run ids one statement reads (SQLite binds at most 32766 parameters; plenty of margin). */
const IDS_PER_STATEMENT = 500;

interface Batch {
  ids: Set<string>;
  result: Promise<Map<string, RunRecord>>;
  resolve(runs: Map<string, RunRecord>): void;
  reject(err: unknown): void;
}

/**
 * The store reads of the sync calls (TriggerSync, InvokeFunctionSync) waiting in this process,
 * coalesced (issue 11: under load every waiting call read its runs every `syncPollMs`, one
 * statement each): at most one read is in flight; the calls that ask meanwhile share the next
 * read, one `readSyncRuns` unit for all their runs. A read always begins after its callers asked,
 * so each sees every outcome committed before it asked, as its own read would. A failed read
 * fails each call that shared it, as its own read would have.
 */
export class SyncRunReads {
  private inFlight?: Promise<unknown>;
  private pending?: Batch;

  constructor(private readonly store: Store) {}

  /** The stored runs among `ids` (a run not found is left out). */
  async read(ids: string[]): Promise<RunRecord[]> {
    if (ids.length === 0) return [];
    const batch = this.pending ?? this.nextBatch();
    for (const id of ids) batch.ids.add(id);
    const byId = await batch.result;
    return ids.map((id) => byId.get(id)).filter((run): run is RunRecord => run !== undefined);
  }

  private nextBatch(): Batch {
    let resolve!: Batch['resolve'];
    let reject!: Batch['reject'];
    const result = new Promise<Map<string, RunRecord>>((res, rej) => { resolve = res; reject = rej; });
    const batch: Batch = { ids: new Set(), result, resolve, reject };
    this.pending = batch;
    // Callers of this tick join it; one that comes while a read is in flight waits for that read to end.
    const start = () => this.start(batch);
    if (this.inFlight) void this.inFlight.then(start, start);
    else queueMicrotask(start);
    return batch;
  }

  private start(batch: Batch): void {
    this.pending = undefined;
    const ids = [...batch.ids];
    const read = this.store.read('readSyncRuns', async (tx) => {
      const runs = new Map<string, RunRecord>();
      for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
        for (const run of await runsSql.getRuns(tx, ids.slice(i, i + IDS_PER_STATEMENT))) runs.set(run.id, run);
      }
      return runs;
    });
    read.then(batch.resolve, batch.reject);
    const settled: Promise<unknown> = read.then(() => undefined, () => undefined).finally(() => {
      if (this.inFlight === settled) this.inFlight = undefined;
    });
    this.inFlight = settled;
  }
}
