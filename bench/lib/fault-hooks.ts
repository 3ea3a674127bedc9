import { Bus, BusMessage, PublishOptions, Subscription } from '@ironflow/bus';
import { FollowUpTracker } from '@ironflow/follow-up';

/*
 * Copies of two fault hooks of libs/testing (which the build excludes, so bench code cannot
 * import it): keep them in step with libs/testing/src/faulty-bus.ts and crashing-follow-ups.ts.
 */

/** A bus whose publishes matching a rule fail (as a JetStream publish with no acknowledgement). */
export class FaultyBus implements Bus {
  private rules: { match: (subject: string) => boolean }[] = [];
  failed = 0;

  constructor(private readonly inner: Bus) {}

  failPublishes(match: (subject: string) => boolean): void {
    this.rules.push({ match });
  }

  heal(): void {
    this.rules = [];
  }

  async publish(subject: string, data: unknown, options?: PublishOptions): Promise<void> {
    if (this.rules.some((r) => r.match(subject))) {
      this.failed += 1;
      throw new Error(`fault hook: publish to ${subject} failed`);
    }
    await this.inner.publish(subject, data, options);
  }

  subscribe(pattern: string, handler: (message: BusMessage) => void): Subscription {
    return this.inner.subscribe(pattern, handler);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

export const isResultsSubject = (subject: string) => subject.includes('.results.');

/** "The node dies right after the commit": once `crash()` is called, every follow-up is dropped unrun. */
export class CrashingFollowUpTracker extends FollowUpTracker {
  private crashed = false;
  readonly dropped: string[] = [];

  constructor() {
    super({ warn: () => undefined });
  }

  crash(): void {
    this.crashed = true;
  }

  override track(kind: string, work: () => Promise<void>): void {
    if (this.crashed) {
      this.dropped.push(kind);
      return;
    }
    super.track(kind, work);
  }
}
