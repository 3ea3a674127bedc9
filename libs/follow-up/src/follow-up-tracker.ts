/**
 * Tracks follow-up work that runs after a commit (specification, "Shutdown"): each follow-up runs
 * detached from the caller (a caller's cancel cannot end it), and `drain` waits for those still
 * running, up to a deadline, so an outcome committed during shutdown is still announced.
 */
export interface FollowUpLogger {
  warn(message: string, meta?: Record<string, unknown>): void;
}

export class FollowUpTracker {
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly logger: FollowUpLogger) {}

  /** Starts `work` now, off the caller's path; its failure is logged, never thrown. */
  track(name: string, work: () => Promise<void>): void {
    const promise: Promise<void> = Promise.resolve()
      .then(work)
      .catch((err: unknown) => this.logger.warn(`follow-up ${name} failed`, { error: String(err) }))
      .finally(() => this.running.delete(promise));
    this.running.add(promise);
  }

  get size(): number {
    return this.running.size;
  }

  /** Waits for every tracked follow-up, including ones started while waiting, up to `timeoutMs`. */
  async drain(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.running.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) {
        this.logger.warn('follow-ups still running after the drain deadline', { count: this.running.size });
        return false;
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.running]),
        new Promise((resolve) => { timer = setTimeout(resolve, left); }),
      ]);
      clearTimeout(timer);
    }
    return true;
  }
}
