import { E_ALREADY_LOCKED, E_TIMEOUT, Semaphore, tryAcquire, withTimeout } from 'async-mutex';

/**
 * A bounded set of slots (DESIGN.md principle 4): work that can pile up on a stuck table takes a
 * slot first, so it never holds more than `size` connections. `tryRun` skips when none is free;
 * `run` waits for one.
 */
export class SlotSet {
  private readonly semaphore: Semaphore;

  constructor(readonly size: number) {
    this.semaphore = new Semaphore(size);
  }

  /** Runs `work` in a free slot, or returns `{ ran: false }` at once when every slot is taken. */
  async tryRun<T>(work: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    try {
      const value = await tryAcquire(this.semaphore).runExclusive(work);
      return { ran: true, value };
    } catch (err) {
      if (err === E_ALREADY_LOCKED) return { ran: false };
      throw err;
    }
  }

  /** Takes a free slot and returns its release, or `null` at once when every slot is taken. */
  async tryAcquire(): Promise<(() => void) | null> {
    try {
      const [, release] = await tryAcquire(this.semaphore).acquire();
      return release;
    } catch (err) {
      if (err === E_ALREADY_LOCKED) return null;
      throw err;
    }
  }

  /** Waits up to `waitMs` for a slot and returns its release, or `null` when none came free in time. */
  async acquireWithin(waitMs: number): Promise<(() => void) | null> {
    try {
      const [, release] = await withTimeout(this.semaphore, waitMs).acquire();
      return release;
    } catch (err) {
      if (err === E_TIMEOUT) return null;
      throw err;
    }
  }

  /** Waits for a slot, then runs `work` in it. */
  run<T>(work: () => Promise<T>): Promise<T> {
    return this.semaphore.runExclusive(work);
  }

  get free(): number {
    return Math.max(0, this.semaphore.getValue());
  }
}

/** A quarter of the PostgreSQL pool, or 4 on SQLite (the specification's slot size). */
export function slotsFor(dialect: 'postgres' | 'sqlite', poolSize: number): number {
  return dialect === 'sqlite' ? 4 : Math.max(1, Math.floor(poolSize / 4));
}
