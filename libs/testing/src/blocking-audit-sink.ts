import { AuditNotWritten, AuditSink, AuditWriteOptions, ScopedAuditRow } from '@ironflow/follow-up';

/**
 * The "block audit insert" fault hook, behind the audit sink port (STYLE.md habit 6): while
 * blocked, a write whose rows `match` accepts waits as an insert on a locked `audit_events` table
 * would, until `unblock()` (then it is written, if budget is left) or until its budget runs out or
 * the recorder stops (then it is not written, as the writer's lock timeout would end it).
 * Everything else passes through to the real sink.
 */
export class BlockingAuditSink implements AuditSink {
  /** Event types of every row that reached this sink, in order. */
  readonly received: string[] = [];
  /** Event types of every row the real sink wrote. */
  readonly written: string[] = [];
  /** Writes waiting on the block right now, and the most ever at once. */
  waiting = 0;
  maxWaiting = 0;
  private match: ((row: ScopedAuditRow) => boolean) | null = null;
  private slowMs = 0;
  private released: (() => void)[] = [];

  constructor(private readonly inner: AuditSink) {}

  /** Blocks writes with a row `match` accepts (default: every row). */
  block(match: (row: ScopedAuditRow) => boolean = () => true): void {
    this.match = match;
  }

  /** Makes every write take `ms` per row before its insert (a slow commit); past its budget it is not written. */
  slow(ms: number): void {
    this.slowMs = ms;
  }

  /** Lets every waiting and later write through. */
  unblock(): void {
    this.match = null;
    for (const release of this.released.splice(0)) release();
  }

  async write(rows: ScopedAuditRow[], options: AuditWriteOptions): Promise<void> {
    this.received.push(...rows.map((r) => r.eventType));
    const started = Date.now();
    if (this.match && rows.some(this.match)) {
      this.waiting += 1;
      this.maxWaiting = Math.max(this.maxWaiting, this.waiting);
      try {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new AuditNotWritten('budget', 'fault hook: audit insert blocked past its budget')), options.budgetMs);
          const onAbort = () => reject(new AuditNotWritten('stopped', 'fault hook: audit insert blocked when the recorder stopped'));
          options.signal.addEventListener('abort', onAbort, { once: true });
          this.released.push(() => {
            clearTimeout(timer);
            options.signal.removeEventListener('abort', onAbort);
            resolve();
          });
        });
      } finally {
        this.waiting -= 1;
      }
    }
    if (this.slowMs > 0) {
      await new Promise((r) => setTimeout(r, this.slowMs * rows.length));
      if (Date.now() - started >= options.budgetMs) throw new AuditNotWritten('budget', 'fault hook: slow commit past its budget');
    }
    await this.inner.write(rows, { ...options, budgetMs: options.budgetMs - (Date.now() - started) });
    this.written.push(...rows.map((r) => r.eventType));
  }
}
