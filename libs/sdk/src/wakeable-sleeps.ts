/**
 * Timer sleeps that `wakeAll()` ends early: the workers sleep between polls and reconnects, and
 * `stop()` / `drain()` must not wait out a sleep. Timers are cleared when woken.
 */
export class WakeableSleeps {
  private readonly sleepers = new Set<() => void>();

  /** Resolves after `ms`, or at once when `wakeAll()` is called first. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }

  wakeAll(): void {
    for (const wake of [...this.sleepers]) wake();
  }
}
