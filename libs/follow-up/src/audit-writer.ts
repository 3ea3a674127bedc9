import { Store, auditSql } from '@ironflow/store';
import { ScopedAuditRow } from './audit-recorder';
import { SlotSet } from './slot-set';

/**
 * The audit-writer's side (DESIGN.md "Audit"): rows that arrive together are written in one
 * multi-row insert, each insert in one of a bounded set of slots, so a locked `audit_events`
 * table holds at most `slots.size` connections and never the engine's pool.
 */
export class AuditWriter {
  private queue: { rows: ScopedAuditRow[]; signal?: AbortSignal; resolve: () => void; reject: (err: unknown) => void }[] = [];
  private scheduled = false;

  constructor(private readonly store: Store, private readonly slots: SlotSet) {}

  /**
   * Resolves when `rows` are inserted; rejects when the insert failed, or when `signal` aborted
   * before their insert began (the rows are then not written).
   */
  write(rows: ScopedAuditRow[], signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ rows, signal, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const queued = this.queue;
    this.queue = [];
    let batch = queued;
    try {
      await this.slots.run(async () => {
        batch = queued.filter((b) => {
          if (!b.signal?.aborted) return true;
          b.reject(new Error('audit write ended before its insert'));
          return false;
        });
        if (batch.length === 0) return;
        await this.store.unitOfWork('insertAuditRows', (tx) => auditSql.insertAuditRows(tx, batch.flatMap((b) => b.rows)));
      });
      for (const b of batch) b.resolve();
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
}
