import { Store, auditSql } from '@ironflow/store';
import { AuditNotWritten, ScopedAuditRow } from './audit-recorder';
import { SlotSet } from './slot-set';

/** How long rows may take when their sender gave no budget (an older sender), ms. */
const DEFAULT_BUDGET_MS = 5000;
/** How long a request's fate is kept once settled, ms: far past any sender's wait for its answer. */
export const AUDIT_FATE_KEEP_MS = 600_000;
/** How often a batch also deletes fates older than {@link AUDIT_FATE_KEEP_MS}, ms. */
const FATE_CLEANUP_EVERY_MS = 60_000;
/** While an insert runs, how long the first row of the next batch waits for others before their insert begins, ms (issue 11). */
export const AUDIT_BATCH_WINDOW_MS = 10;

interface Pending {
  rows: ScopedAuditRow[];
  deadline: number;
  signal?: AbortSignal;
  requestId?: string;
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
 *
 * A request sent over NATS carries a `requestId`, and the insert settles its fate as `written`
 * (`audit_write_fates`) in the same transaction. A sender that heard no answer settles it as
 * `given_up` instead (`StoreAuditFates`); whichever commits first wins. So a request whose sender
 * gave up is not written (it is answered `budget`), and one the writer stored before it died
 * unanswered is known to the sender as written: its rows are stored or counted, never both.
 */
export class AuditWriter {
  private queue: Pending[] = [];
  private scheduled = false;
  /** Inserts begun and not yet settled. */
  private inserting = 0;
  private lastFateCleanup = Date.now();

  constructor(
    private readonly store: Store,
    private readonly slots: SlotSet,
    private readonly windowMs: number = AUDIT_BATCH_WINDOW_MS,
  ) {}

  /**
   * Resolves when `rows` are inserted; rejects with `AuditNotWritten` when they were not and will
   * not be: their budget (`budgetMs`, default 5000) ran out before their insert began or while it
   * waited for a lock, `signal` aborted before it began, the insert failed, or (with `requestId`)
   * the sender had already given the request up.
   */
  write(rows: ScopedAuditRow[], options: { budgetMs?: number; signal?: AbortSignal; requestId?: string } = {}): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ rows, deadline: Date.now() + (options.budgetMs ?? DEFAULT_BUDGET_MS), signal: options.signal, requestId: options.requestId, resolve, reject });
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
    let givenUp = new Set<Pending>();
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
        await this.deleteOldFates();
        // One statement, one round trip on PostgreSQL: the lock limit goes with it (measured before
        // the connection is taken; the writer's slots are fewer than its pool's connections).
        const givenUpIds = await this.store.unitOfWork('insertAuditRows', async (tx) => {
          if (Date.now() >= deadline) throw new AuditNotWritten('budget', 'audit write reached its deadline waiting for a connection');
          return auditSql.writeAuditRequests(tx, batch);
        }, { oneStatement: true, lockLimitMs: Math.max(1, deadline - Date.now()) });
        givenUp = new Set(batch.filter((b) => b.requestId !== undefined && givenUpIds.has(b.requestId)));
      });
      for (const b of batch) {
        if (givenUp.has(b)) b.reject(new AuditNotWritten('budget', 'audit write given up by its sender before its insert (no answer within its budget)'));
        else b.resolve();
      }
    } catch (err) {
      const notWritten = err instanceof AuditNotWritten ? err : new AuditNotWritten('error', `audit insert failed: ${err instanceof Error ? err.message : String(err)}`);
      for (const b of batch) b.reject(notWritten);
    } finally {
      this.inserting -= 1;
    }
  }

  /** About once a minute, before a batch's insert (in its slot): deletes the fates no sender can still ask about. */
  private async deleteOldFates(): Promise<void> {
    if (Date.now() - this.lastFateCleanup < FATE_CLEANUP_EVERY_MS) return;
    this.lastFateCleanup = Date.now();
    await this.store.unitOfWork('deleteAuditFates', (tx) => auditSql.deleteAuditFatesBefore(tx, tx.now - AUDIT_FATE_KEEP_MS), { oneStatement: true });
  }
}
