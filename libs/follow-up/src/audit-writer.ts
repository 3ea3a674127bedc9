import { Store, auditSql } from '@ironflow/store';
import { AuditNotWritten, ScopedAuditRow } from './audit-recorder';
import { SlotSet } from './slot-set';

/** How long rows may take when their sender gave no budget (an older sender), ms. */
const DEFAULT_BUDGET_MS = 5000;
/** While an insert runs, how long the first row of the next batch waits for others before their insert begins, ms (issue 11). */
export const AUDIT_BATCH_WINDOW_MS = 10;

interface Pending {
  rows: ScopedAuditRow[];
  deadline: number;
  signal?: AbortSignal;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The audit-writer's side (DESIGN.md "Audit"): rows that arrive together are written in one
 * multi-row insert. When no insert is running a batch begins at once (no row waits on an idle
 * writer); while one runs, a batch collects the rows that arrive within `windowMs` (default
 * {@link AUDIT_BATCH_WINDOW_MS}) of its first, so under load many runs' rows share a
 * transaction. Each insert runs in one of a bounded set of slots, so a locked `audit_events`
 * table holds at most `slots.size` connections and never the engine's pool.
 *
 * Each request carries its sender's budget. Rows are inserted only if their insert begins before
 * that deadline, and the insert's lock waits end at the earliest deadline of its batch (PostgreSQL
 * `lock_timeout`; SQLite runs one unit at a time), so a stuck table answers "not written" at about
 * the deadline instead of writing rows the sender already gave up on. A request's promise settles
 * only once its rows' fate is known: that is what lets the sender count every lost row exactly.
 */
export class AuditWriter {
  private queue: Pending[] = [];
  private scheduled = false;
  /** Inserts begun and not yet settled. */
  private inserting = 0;

  constructor(
    private readonly store: Store,
    private readonly slots: SlotSet,
    private readonly windowMs: number = AUDIT_BATCH_WINDOW_MS,
  ) {}

  /**
   * Resolves when `rows` are inserted; rejects with `AuditNotWritten` when they were not and will
   * not be: their budget (`budgetMs`, default 5000) ran out before their insert began or while it
   * waited for a lock, `signal` aborted before it began, or the insert failed.
   */
  write(rows: ScopedAuditRow[], options: { budgetMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ rows, deadline: Date.now() + (options.budgetMs ?? DEFAULT_BUDGET_MS), signal: options.signal, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        if (this.inserting > 0 && this.windowMs > 0) setTimeout(() => void this.flush(), this.windowMs);
        else setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const queued = this.queue;
    this.queue = [];
    let batch: Pending[] = [];
    this.inserting += 1;
    try {
      await this.slots.run(async () => {
        const now = Date.now();
        batch = queued.filter((b) => {
          if (b.signal?.aborted) b.reject(new AuditNotWritten('stopped', 'audit write ended before its insert (audit recorder stopped)'));
          else if (b.deadline <= now) b.reject(new AuditNotWritten('budget', 'audit write reached its deadline before its insert began (waiting for an audit slot and a deadline)'));
          else return true;
          return false;
        });
        if (batch.length === 0) return;
        const deadline = Math.min(...batch.map((b) => b.deadline));
        await this.store.unitOfWork('insertAuditRows', async (tx) => {
          const left = deadline - Date.now();
          if (left <= 0) throw new AuditNotWritten('budget', 'audit write reached its deadline waiting for a connection');
          await tx.setLockTimeout(left);
          await auditSql.insertAuditRows(tx, batch.flatMap((b) => b.rows));
        });
      });
      for (const b of batch) b.resolve();
    } catch (err) {
      const notWritten = err instanceof AuditNotWritten ? err : new AuditNotWritten('error', `audit insert failed: ${err instanceof Error ? err.message : String(err)}`);
      for (const b of batch) b.reject(notWritten);
    } finally {
      this.inserting -= 1;
    }
  }
}
