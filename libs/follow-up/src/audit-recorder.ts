import { AuditRow } from '@ironflow/store';

/** A row with the scope its subject needs. */
export interface ScopedAuditRow extends AuditRow {
  project: string;
  env: string;
}

/** Where the recorder sends rows: the audit-writer, over NATS request-reply or in-process. */
export interface AuditSink {
  /** Resolves when the rows are inserted; rejects when they were not. */
  write(rows: ScopedAuditRow[], signal: AbortSignal): Promise<void>;
}

export interface AuditRecorderOptions {
  /** Writes running or waiting at once; past it a write is dropped at once (default 1024). */
  backlog?: number;
  /** Time a write has, including any wait, before it is dropped (default 5000 ms). */
  budgetMs?: number;
  /** Counts a dropped row (`ironflow_audit_write_failures_total{event_type}`). */
  onDrop: (eventType: string, reason: 'backlog' | 'budget' | 'stopped' | 'error') => void;
}

/**
 * The one door every workflow audit row passes (specification, "A stuck store cannot take the
 * pool"): at most `backlog` writes running or waiting, each with `budgetMs` to finish including
 * the wait, every drop counted; after `stop()` every pending and later write is dropped and
 * counted. `record` never throws: it resolves `true` when the row landed, `false` when dropped.
 */
export class AuditRecorder {
  private readonly pending = new Set<AbortController>();
  private stopped = false;
  private readonly backlog: number;
  private readonly budgetMs: number;

  constructor(private readonly sink: AuditSink, private readonly options: AuditRecorderOptions) {
    this.backlog = options.backlog ?? 1024;
    this.budgetMs = options.budgetMs ?? 5000;
  }

  async record(row: ScopedAuditRow): Promise<boolean> {
    if (this.stopped) return this.drop(row, 'stopped');
    if (this.pending.size >= this.backlog) return this.drop(row, 'backlog');
    const controller = new AbortController();
    this.pending.add(controller);
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<'budget'>((resolve) => { timer = setTimeout(() => resolve('budget'), this.budgetMs); });
    const aborted = new Promise<'stopped'>((resolve) => controller.signal.addEventListener('abort', () => resolve('stopped'), { once: true }));
    try {
      const outcome = await Promise.race([
        this.sink.write([row], controller.signal).then(() => 'written' as const, () => 'error' as const),
        budget,
        aborted,
      ]);
      if (outcome === 'written') return true;
      controller.abort();
      return this.drop(row, outcome);
    } finally {
      clearTimeout(timer);
      this.pending.delete(controller);
    }
  }

  /** Number of writes running or waiting. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Ends every pending write (dropped and counted) and drops every later one. */
  stop(): void {
    this.stopped = true;
    for (const controller of this.pending) controller.abort();
  }

  private drop(row: ScopedAuditRow, reason: 'backlog' | 'budget' | 'stopped' | 'error'): false {
    this.options.onDrop(row.eventType, reason);
    return false;
  }
}
