import type { StepResult } from '@ironflow/contracts';

/** Largest number of steps in one `progress` update (WIRE-PROTOCOL.md 3.7, 6). */
export const MAX_STEPS_PER_CHECKPOINT = 500;
/** Ceiling of the checkpoint retry delay, in ms. */
export const MAX_CHECKPOINT_BACKOFF_MS = 30_000;

/** Options of a {@link Checkpointer}. */
export interface CheckpointerOptions {
  /** Debounce delay in ms after a step is recorded; 0 turns checkpointing off. */
  intervalMs: number;
  /** Sequence of this execution's first new step (`step_sequence_base`, default 0). */
  sequenceBase: number;
  /**
   * Sends one `progress` update and resolves to its HTTP status; rejects on a network failure.
   * Never called concurrently.
   */
  send(steps: StepResult[], stepOffset: number): Promise<number>;
}

/**
 * Per-job progress reporting (WIRE-PROTOCOL.md 3.7): steps are queued as they finish; a debounce
 * timer (armed when a step arrives and no timer or send is pending) sends the next ≤ 500 unflushed
 * steps with `step_offset = sequenceBase + flushed`. Sends are serialized. Steps count as flushed
 * only after a 2xx; a 4xx (incl. 409) turns checkpointing off for the job; a 5xx or network
 * failure keeps them queued and retries after `min(interval × 2^failures, 30000)` ms.
 * Timers are unref'd and cleared by {@link settle}.
 */
export class Checkpointer {
  private readonly pending: StepResult[] = [];
  private flushed = 0;
  private failures = 0;
  private enabled: boolean;
  private closed = false;
  private timer?: NodeJS.Timeout;
  private inflight?: Promise<boolean>;

  constructor(private readonly options: CheckpointerOptions) {
    this.enabled = options.intervalMs > 0;
  }

  /** `step_offset` of the next update: sequence base + steps flushed so far. */
  get stepOffset(): number {
    return this.options.sequenceBase + this.flushed;
  }

  /** Steps not flushed yet, oldest first. */
  get unflushed(): StepResult[] {
    return [...this.pending];
  }

  /** Whether progress updates are still being sent (not configured off, not latched off by a 4xx). */
  get active(): boolean {
    return this.enabled;
  }

  /** Queues a finished step and arms the debounce timer if nothing is pending. */
  record(step: StepResult): void {
    this.pending.push(step);
    if (this.enabled && !this.closed && !this.timer && !this.inflight) this.arm();
  }

  /** Stops the timer and waits for a send under way; afterwards nothing is sent on its own. */
  async settle(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.inflight;
  }

  /**
   * After {@link settle}: sends batches until at most `keep` steps remain unflushed, or a send
   * fails, or checkpointing is off. `keep = 0` flushes everything (the yield path).
   *
   * `retry`, when given, is asked after each transient failure (5xx or network error; never after
   * a 4xx, which turns checkpointing off) with the number of consecutive failures so far (1, 2, …);
   * it resolves `true` (typically after a backoff sleep) to send the same batch again, `false` to
   * give up. Without it the first failure ends the flush.
   */
  async flushDownTo(keep: number, retry?: (failures: number) => Promise<boolean>): Promise<void> {
    let failures = 0;
    while (this.enabled && this.pending.length > keep) {
      if (await this.sendBatch()) {
        failures = 0;
        continue;
      }
      if (!this.enabled || !retry || !(await retry(++failures))) return;
    }
  }

  private arm(): void {
    const delay = this.failures === 0 ? this.options.intervalMs : Math.min(this.options.intervalMs * 2 ** this.failures, MAX_CHECKPOINT_BACKOFF_MS);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const sending = this.sendBatch();
      this.inflight = sending;
      void sending.finally(() => {
        if (this.inflight === sending) this.inflight = undefined;
        if (this.enabled && !this.closed && this.pending.length > 0 && !this.timer) this.arm();
      });
    }, delay);
    this.timer.unref();
  }

  /** Sends the next batch; resolves true when it was accepted. */
  private async sendBatch(): Promise<boolean> {
    const batch = this.pending.slice(0, MAX_STEPS_PER_CHECKPOINT);
    if (batch.length === 0) return true;
    let status: number;
    try {
      status = await this.options.send(batch, this.stepOffset);
    } catch {
      this.failures++;
      return false;
    }
    if (status >= 200 && status < 300) {
      this.pending.splice(0, batch.length);
      this.flushed += batch.length;
      this.failures = 0;
      return true;
    }
    if (status >= 400 && status < 500) this.enabled = false;
    else this.failures++;
    return false;
  }
}
