import { Bus, BusMessage, PublishAck, PublishOptions, Subscription } from '@ironflow/bus';

/**
 * A fault hook around a real bus, behind the same port: publishes whose subject matches a rule
 * fail (as a JetStream publish that gets no acknowledgement), everything else passes through.
 * Every publish attempt is recorded.
 */
export class FaultyBus implements Bus {
  readonly attempts: { subject: string; failed: boolean }[] = [];
  private rules: { match: (subject: string) => boolean; left: number }[] = [];

  constructor(private readonly inner: Bus) {}

  /** Fails the next `count` publishes (default: all) whose subject `match` accepts. */
  failPublishes(match: (subject: string) => boolean, count = Number.POSITIVE_INFINITY): void {
    this.rules.push({ match, left: count });
  }

  heal(): void {
    this.rules = [];
  }

  async publish(subject: string, data: unknown, options?: PublishOptions): Promise<PublishAck> {
    const rule = this.rules.find((r) => r.left > 0 && r.match(subject));
    this.attempts.push({ subject, failed: !!rule });
    if (rule) {
      rule.left -= 1;
      throw new Error(`fault hook: publish to ${subject} failed`);
    }
    return this.inner.publish(subject, data, options);
  }

  subscribe(pattern: string, handler: (message: BusMessage) => void): Subscription {
    return this.inner.subscribe(pattern, handler);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

export const isResultsSubject = (subject: string) => subject.includes('.results.');
export const isRunEventSubject = (subject: string) => subject.startsWith('public.');
