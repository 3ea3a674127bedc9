/**
 * The `Clock` port (DESIGN.md "Time"): every unit of work reads `now()` once and passes it into its
 * SQL. The store clock is the database server's clock; the adapter measures its offset from this
 * node's clock at start and every `resyncMs`, so a read costs no round trip. `skewMs` lets a test
 * move time forward without sleeping.
 */
export interface Clock {
  /** Milliseconds since the epoch, on the store's clock. */
  now(): number;
}

export class StoreClock implements Clock {
  private offsetMs = 0;
  private skewMs = 0;

  /** Sets the measured offset of the store's clock from `Date.now()`, in ms. */
  setOffset(offsetMs: number): void {
    this.offsetMs = offsetMs;
  }

  /** Moves this clock by `ms` (tests only: leases, sleeps and backoffs then expire at once). */
  advance(ms: number): void {
    this.skewMs += ms;
  }

  now(): number {
    return Date.now() + this.offsetMs + this.skewMs;
  }
}
