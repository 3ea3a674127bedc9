/**
 * An unbounded single-consumer queue that is also an async iterable: `push` values, then `close()`
 * (iteration ends after the queued values) or `fail(err)` (iteration throws `err` after the
 * queued values). Pushes after close/fail are dropped. Used for a stream's outgoing messages.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private ended = false;
  private error: { err: unknown } | undefined;
  private waiter?: () => void;

  push(item: T): void {
    if (this.ended) return;
    this.items.push(item);
    this.notify();
  }

  close(): void {
    this.ended = true;
    this.notify();
  }

  fail(err: unknown): void {
    if (this.ended) return;
    this.error = { err };
    this.ended = true;
    this.notify();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      while (this.items.length > 0) yield this.items.shift() as T;
      if (this.ended) {
        if (this.error) throw this.error.err;
        return;
      }
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }

  private notify(): void {
    const wake = this.waiter;
    this.waiter = undefined;
    wake?.();
  }
}
