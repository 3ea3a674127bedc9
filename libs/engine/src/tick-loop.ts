/**
 * One of the engine's timed loops: runs `work` `periodMs` after the previous run ended, until
 * `stop`. Loops are independent, so a run that stalls (a locked row, a stuck table) holds only
 * its own loop. `work` must not throw (callers guard their passes).
 */
export class TickLoop {
  private timer?: NodeJS.Timeout;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private started = false;

  constructor(private readonly periodMs: number, private readonly work: () => Promise<void>) {}

  /** Starts the loop; a second call does nothing. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.schedule();
  }

  /** Stops scheduling runs and resolves once the run under way (if any) has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.work().finally(() => this.schedule());
    }, this.periodMs);
  }
}
