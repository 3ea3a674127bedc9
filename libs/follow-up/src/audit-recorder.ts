import { setMaxListeners } from 'node:events';
import { RecordingProfile, profileRecords } from '@ironflow/contracts';
import { AuditRow } from '@ironflow/store';

/** A row with the scope its subject needs. */
export interface ScopedAuditRow extends AuditRow {
  project: string;
  env: string;
}

/** Why rows were not written: the writer says which, so the recorder counts them exactly. */
export type AuditDropReason = 'backlog' | 'budget' | 'stopped' | 'error';

/** Thrown by a sink for rows it did not write and will not write. */
export class AuditNotWritten extends Error {
  constructor(readonly reason: AuditDropReason, message: string) {
    super(message);
    this.name = 'AuditNotWritten';
  }
}

export interface AuditWriteOptions {
  /**
   * Time left for these rows, ms. The writer inserts them only if their insert begins within it,
   * and bounds the insert's lock waits by what is left, so it settles about then.
   */
  budgetMs: number;
  /**
   * Aborted when the recorder stops: rows whose insert has not begun are not written. A sink may
   * listen on it while its write runs (one listener per write: the recorder allows one per slot
   * without Node's leak warning) and must remove the listener when the write settles.
   */
  signal: AbortSignal;
}

/** Where the recorder sends rows: the audit-writer, over NATS request-reply or in-process. */
export interface AuditSink {
  /**
   * Resolves when the rows are inserted; rejects (ideally with `AuditNotWritten`) when they were
   * not. A sink never rejects while an insert of the rows may still commit: "every row is stored
   * or counted, exactly once" rests on that. An answer that never comes (NATS: no reply within
   * the budget plus a grace) is settled in the store (`NatsAuditSink` with `AuditFates`); only
   * when that cannot be told either does the sink reject while a writer may have stored the rows.
   */
  write(rows: ScopedAuditRow[], options: AuditWriteOptions): Promise<void>;
}

/** Reads a function's recording profile from the store; `null` when the function does not exist. */
export type RecordingLookup = (project: string, env: string, functionId: string) => Promise<RecordingProfile | null>;

/** The event type a row lost at its recording lookup is counted under. */
export const RECORDING_LOOKUP_EVENT = 'recording_lookup';

export interface AuditRecorderOptions {
  /** Writes and recording lookups running at once: a quarter of the pool, 4 on SQLite. */
  slots: number;
  /** Writes and lookups running or waiting at once; past it a write is dropped at once (default 1024). */
  backlog?: number;
  /** Time a row has, including its recording lookup and its wait for a slot, ms (default 5000). */
  budgetMs?: number;
  /** Most rows sent to the writer in one request (default 256). */
  maxBatch?: number;
  /**
   * How long a row recorded with `{ background: true }` may wait for other rows to share its
   * request, ms (default 0: it goes as soon as a slot is free). A row recorded without it, or a
   * batch that reaches `maxBatch`, sends every row waiting at once (issue 11: the rows of
   * consecutive runs share one insert instead of one transaction each).
   */
  lingerMs?: number;
  /** Reads a function's recording profile; without it every row is recorded. */
  recordingLookup?: RecordingLookup;
  /** How long a looked-up profile is used before it is read again, ms (default 30000). */
  recordingRefreshMs?: number;
  /**
   * Counts a dropped row (`ironflow_audit_write_failures_total{event_type}`): its event type, or
   * `recording_lookup` when it failed at its lookup; `error` says why, for the log.
   */
  onDrop: (eventType: string, reason: AuditDropReason, error: string) => void;
}

interface QueuedRow {
  kind: 'row';
  row: ScopedAuditRow;
  deadline: number;
  /** Not sent before this time (ms since the epoch) unless another row's request takes it along. */
  notBefore: number;
  timer: NodeJS.Timeout;
  settle: (written: boolean) => void;
}

interface QueuedLookup {
  kind: 'lookup';
  run: () => Promise<void>;
  cancel: () => void;
}

interface CachedProfile {
  profile: RecordingProfile | null;
  readAt: number;
  refreshing?: boolean;
}

/**
 * The one door every workflow and capacity audit row passes (specification, "A stuck store cannot
 * take the pool" and "Audit rows can drop under load"):
 * - at most `backlog` writes and lookups running or waiting; past it a row is dropped at once;
 * - `slots` requests running at once; the rows waiting when a slot frees go together in one
 *   request (at most `maxBatch`); a background row waits up to `lingerMs` for others to join it;
 * - each row has `budgetMs` from `record` to get a slot and be written, including its recording
 *   lookup; a row still waiting at its deadline is dropped; a row sent carries what is left of
 *   its budget, and the writer inserts it within that or not at all;
 * - the recording profile of the row's function is looked up (in a slot, counted in the backlog)
 *   when not cached and refreshed every `recordingRefreshMs` in the background; a failed first
 *   lookup drops the row as `recording_lookup`; a failed refresh keeps the last profile; a
 *   function that does not exist records nothing and loses nothing;
 * - every row is stored or counted, exactly once: a row is counted when it was never sent, or
 *   when the writer answered that it did not write it (see `AuditSink`);
 * - after `stop()` nothing starts; rows waiting are dropped and counted, and `stop` waits for the
 *   requests running (each bounded by its budget).
 * `record` never throws: it resolves `true` when the row landed, `false` when it did not.
 */
export class AuditRecorder {
  private readonly backlog: number;
  private readonly budgetMs: number;
  private readonly maxBatch: number;
  private readonly refreshMs: number;
  private lingerMs: number;
  /** Wakes `pump` when the earliest lingering row is due. */
  private lingerTimer?: NodeJS.Timeout;
  private lingerDue = Infinity;
  private readonly queue: (QueuedRow | QueuedLookup)[] = [];
  private readonly running = new Set<Promise<void>>();
  private readonly profiles = new Map<string, CachedProfile>();
  private readonly lookups = new Map<string, Promise<RecordingProfile | null>>();
  private readonly stopping = new AbortController();
  /**
   * Rows waiting for a recording lookup: `stop` fails each at once. A set, not an 'abort' listener
   * a row on `stopping.signal`: rows waiting for a function's first lookup are many under load, and
   * past 10 listeners Node warns of a leak (MaxListenersExceededWarning).
   */
  private readonly lookupWaiters = new Set<(stopped: AuditNotWritten) => void>();
  private busy = 0;
  private load = 0;

  constructor(private readonly sink: AuditSink, private readonly options: AuditRecorderOptions) {
    this.backlog = options.backlog ?? 1024;
    this.budgetMs = options.budgetMs ?? 5000;
    this.maxBatch = options.maxBatch ?? 256;
    this.refreshMs = options.recordingRefreshMs ?? 30_000;
    this.lingerMs = options.lingerMs ?? 0;
    // A sink waiting to send a request again listens on the signal: one per slot at most.
    setMaxListeners(Math.max(10, options.slots), this.stopping.signal);
  }

  /**
   * Records `row` if its function's profile records it. Resolves `true` when it landed.
   * `background`: nobody waits for this row on a caller's path, so it may wait up to `lingerMs`
   * for other rows to share its request (its budget is unchanged).
   */
  async record(row: ScopedAuditRow, options: { background?: boolean } = {}): Promise<boolean> {
    if (this.stopped) return this.drop(row.eventType, 'stopped', 'audit recorder stopped');
    if (this.load >= this.backlog) return this.drop(row.eventType, 'backlog', `too many audit writes pending (${this.backlog})`);
    this.load += 1;
    try {
      const deadline = Date.now() + this.budgetMs;
      const profile = await this.profileFor(row, deadline);
      if (profile === 'lost') return false;
      if (profile === null || !profileRecords(profile, row.eventType)) return false;
      if (this.stopped) return this.drop(row.eventType, 'stopped', 'audit recorder stopped');
      return await this.enqueue(row, deadline, options.background ? Date.now() + this.lingerMs : 0);
    } finally {
      this.load -= 1;
    }
  }

  /**
   * Whether a row of `eventType` for this function would certainly not be written: its profile is
   * cached (as `record` would use it) and does not record the type, or the function does not
   * exist. `false` when the profile is not cached, or when every row is recorded (no lookup).
   * Lets a caller skip the work of building a row (issue 11: a read on a report's path).
   */
  skips(project: string, env: string, functionId: string, eventType: string): boolean {
    if (!this.options.recordingLookup) return false;
    const cached = this.profiles.get(key(project, env, functionId));
    if (!cached) return false;
    return cached.profile === null || !profileRecords(cached.profile, eventType);
  }

  /** Forgets a function's cached profile (its registration changed on this node). */
  forgetRecording(project: string, env: string, functionId: string): void {
    this.profiles.delete(key(project, env, functionId));
  }

  /**
   * Shutdown has begun: the background rows waiting for company go now, and later ones go as
   * soon as a slot is free (as with `lingerMs` 0), so a drain waits for no linger. Idempotent.
   */
  endLinger(): void {
    this.lingerMs = 0;
    for (const item of this.queue) if (item.kind === 'row') item.notBefore = 0;
    clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
    this.lingerDue = Infinity;
    this.pump();
  }

  /** Writes and lookups running or waiting. */
  get inFlight(): number {
    return this.load;
  }

  get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  /**
   * Starts nothing more: rows and lookups waiting are dropped and counted at once, every later
   * row too; resolves once the requests running have been answered (each within its budget).
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    clearTimeout(this.lingerTimer);
    for (const fail of this.lookupWaiters) fail(new AuditNotWritten('stopped', 'recording lookup: audit recorder stopped'));
    for (const item of this.queue.splice(0)) {
      if (item.kind === 'row') {
        clearTimeout(item.timer);
        item.settle(this.drop(item.row.eventType, 'stopped', 'audit recorder stopped'));
      } else {
        item.cancel();
      }
    }
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  private enqueue(row: ScopedAuditRow, deadline: number, notBefore: number): Promise<boolean> {
    return new Promise<boolean>((settle) => {
      const item: QueuedRow = {
        kind: 'row',
        row,
        deadline,
        notBefore,
        settle,
        timer: setTimeout(() => {
          const at = this.queue.indexOf(item);
          if (at < 0) return;
          this.queue.splice(at, 1);
          settle(this.drop(row.eventType, 'budget', `waiting for an audit slot and a deadline (${this.budgetMs} ms)`));
        }, Math.max(0, deadline - Date.now())),
      };
      this.queue.push(item);
      this.pump();
    });
  }

  /**
   * Starts queued work while slots are free: a lookup, or the rows waiting as one request once
   * one of them is due (not lingering) or they fill a request; otherwise wakes up when the
   * earliest lingering row is due.
   */
  private pump(): void {
    while (this.busy < this.options.slots && this.queue.length > 0 && !this.stopped) {
      const head = this.queue[0];
      if (head.kind === 'lookup') {
        this.queue.shift();
        this.occupy(head.run());
        continue;
      }
      const now = Date.now();
      let rows = 0;
      let due = Infinity;
      for (const item of this.queue) {
        if (item.kind !== 'row') continue;
        rows += 1;
        due = Math.min(due, item.notBefore);
      }
      if (due > now && rows < this.maxBatch) {
        // Every row lingers: a lookup behind them goes now, the rows when the first is due.
        const lookup = this.queue.findIndex((item) => item.kind === 'lookup');
        if (lookup >= 0) {
          const [item] = this.queue.splice(lookup, 1) as QueuedLookup[];
          this.occupy(item.run());
          continue;
        }
        this.wakeAt(due);
        return;
      }
      const batch: QueuedRow[] = [];
      for (let i = 0; i < this.queue.length && batch.length < this.maxBatch; ) {
        const item = this.queue[i];
        if (item.kind === 'row') {
          this.queue.splice(i, 1);
          clearTimeout(item.timer);
          batch.push(item);
        } else {
          i += 1;
        }
      }
      this.occupy(this.send(batch));
    }
  }

  /** Runs `pump` at `due` (ms since the epoch), unless it is already set to run by then. */
  private wakeAt(due: number): void {
    if (this.lingerTimer && this.lingerDue <= due) return;
    clearTimeout(this.lingerTimer);
    this.lingerDue = due;
    this.lingerTimer = setTimeout(() => {
      this.lingerTimer = undefined;
      this.lingerDue = Infinity;
      this.pump();
    }, Math.max(0, due - Date.now()));
  }

  private occupy(work: Promise<void>): void {
    this.busy += 1;
    const tracked = work.finally(() => {
      this.busy -= 1;
      this.running.delete(tracked);
      this.pump();
    });
    this.running.add(tracked);
  }

  private async send(batch: QueuedRow[]): Promise<void> {
    const budgetMs = Math.min(...batch.map((b) => b.deadline)) - Date.now();
    try {
      if (budgetMs <= 0) throw new AuditNotWritten('budget', `waiting for an audit slot and a deadline (${this.budgetMs} ms)`);
      await this.sink.write(batch.map((b) => b.row), { budgetMs, signal: this.stopping.signal });
      for (const b of batch) b.settle(true);
    } catch (err) {
      const reason = err instanceof AuditNotWritten ? err.reason : 'error';
      for (const b of batch) b.settle(this.drop(b.row.eventType, reason, err instanceof Error ? err.message : String(err)));
    }
  }

  /**
   * The profile of the row's function: cached, or looked up in a slot within the row's budget.
   * `'lost'` when the lookup failed (the row is counted as `recording_lookup`).
   */
  private async profileFor(row: ScopedAuditRow, deadline: number): Promise<RecordingProfile | null | 'lost'> {
    const lookup = this.options.recordingLookup;
    if (!lookup || row.functionId === null) return 'all';
    const k = key(row.project, row.env, row.functionId);
    const cached = this.profiles.get(k);
    if (cached) {
      if (Date.now() - cached.readAt >= this.refreshMs && !cached.refreshing) this.refresh(k, row, cached);
      return cached.profile;
    }
    let timer: NodeJS.Timeout | undefined;
    let onStop: ((stopped: AuditNotWritten) => void) | undefined;
    try {
      return await Promise.race([
        this.lookupOnce(k, row),
        new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new AuditNotWritten('budget', `recording lookup: waiting for an audit slot and a deadline (${this.budgetMs} ms)`)), Math.max(0, deadline - Date.now())); }),
        new Promise<never>((_, reject) => { onStop = reject; this.lookupWaiters.add(reject); }),
      ]);
    } catch (err) {
      const reason = err instanceof AuditNotWritten ? err.reason : 'error';
      this.drop(RECORDING_LOOKUP_EVENT, reason, err instanceof Error ? err.message : String(err));
      return 'lost';
    } finally {
      clearTimeout(timer);
      if (onStop) this.lookupWaiters.delete(onStop);
    }
  }

  /** One lookup per function at a time, in a slot; its result is cached. */
  private lookupOnce(k: string, row: ScopedAuditRow): Promise<RecordingProfile | null> {
    let pending = this.lookups.get(k);
    if (!pending) {
      pending = this.inSlot(() => this.options.recordingLookup!(row.project, row.env, row.functionId!)).then((profile) => {
        this.profiles.set(k, { profile, readAt: Date.now() });
        return profile;
      }).finally(() => this.lookups.delete(k));
      this.lookups.set(k, pending);
    }
    return pending;
  }

  /** Refreshes a cached profile off the row's path; a failure keeps the last profile. */
  private refresh(k: string, row: ScopedAuditRow, cached: CachedProfile): void {
    if (this.stopped || this.load >= this.backlog) return;
    cached.refreshing = true;
    this.load += 1;
    this.lookupOnce(k, row)
      .catch(() => {
        cached.readAt = Date.now();
      })
      .finally(() => {
        cached.refreshing = false;
        this.load -= 1;
      });
  }

  /** Runs `work` in a slot, queued behind the work already waiting; rejects if the recorder stops first. */
  private inSlot<T>(work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.stopped) return reject(new AuditNotWritten('stopped', 'audit recorder stopped'));
      this.queue.push({
        kind: 'lookup',
        run: () => work().then(resolve, reject),
        cancel: () => reject(new AuditNotWritten('stopped', 'audit recorder stopped')),
      });
      this.pump();
    });
  }

  private drop(eventType: string, reason: AuditDropReason, error: string): false {
    this.options.onDrop(eventType, reason, error);
    return false;
  }
}

function key(project: string, env: string, functionId: string): string {
  return `${project}\u0000${env}\u0000${functionId}`;
}
