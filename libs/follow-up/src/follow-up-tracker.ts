/**
 * Tracks follow-up work that runs after a commit (specification, "Shutdown"): each follow-up runs
 * detached from the caller (a caller's cancel cannot end it), and `drain` waits for those still
 * running, up to a deadline, so an outcome committed during shutdown is still announced.
 */
export interface FollowUpLogger {
  warn(message: string, meta?: Record<string, unknown>): void;
}

/** Receives each follow-up's start and end (metrics: attempts, failures, latency). */
export interface FollowUpObserver {
  started(kind: string): void;
  ended(kind: string, ok: boolean, seconds: number): void;
}

const noObserver: FollowUpObserver = { started: () => undefined, ended: () => undefined };

export class FollowUpTracker {
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly logger: FollowUpLogger,
    private readonly observer: FollowUpObserver = noObserver,
  ) {}

  /**
   * Starts `work` now, off the caller's path and outside any caller's cancellation; its failure
   * is logged and counted, never thrown. `kind` names it in logs and metrics.
   */
  track(kind: string, work: () => Promise<void>): void {
    const started = process.hrtime.bigint();
    this.observer.started(kind);
    const end = (ok: boolean) => this.observer.ended(kind, ok, Number(process.hrtime.bigint() - started) / 1e9);
    const promise: Promise<void> = Promise.resolve()
      .then(work)
      .then(
        () => end(true),
        (err: unknown) => {
          end(false);
          this.logger.warn(`follow-up ${kind} failed`, { error: String(err) });
        },
      )
      .finally(() => this.running.delete(promise));
    this.running.add(promise);
  }

  /**
   * Runs `work` on the caller's path but counted as running, so `drain` waits for it: an outcome
   * write already under way when shutdown begins commits, and the follow-ups it starts are
   * drained too (specification, "Shutdown"). Returns or throws what `work` does.
   */
  async during<T>(work: () => Promise<T>): Promise<T> {
    let done!: () => void;
    const promise = new Promise<void>((resolve) => (done = resolve)).finally(() => this.running.delete(promise));
    this.running.add(promise);
    try {
      return await work();
    } finally {
      done();
    }
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
