import { EventEmitter } from 'node:events';
import { Bus, BusMessage, PublishAck, PublishOptions, Subscription } from './bus';

/**
 * The bus of `ironflow dev` and unit tests: delivery in this process only, asynchronously, with
 * JetStream's `msgId` de-duplication window imitated so tests see the same behaviour.
 */
export class InProcessBus implements Bus {
  private readonly emitter = new EventEmitter();
  private readonly patterns = new Map<string, RegExp>();
  private readonly seenMsgIds = new Map<string, { at: number; sequence: number }>();
  /** One sequence for the whole bus (JetStream counts per stream). */
  private sequence = 0;

  constructor(private readonly duplicateWindowMs = 120_000) {
    this.emitter.setMaxListeners(0);
  }

  async publish(subject: string, data: unknown, options: PublishOptions = {}): Promise<PublishAck> {
    const now = Date.now();
    if (options.msgId) {
      const seen = this.seenMsgIds.get(options.msgId);
      if (seen !== undefined && now - seen.at < this.duplicateWindowMs) return { sequence: seen.sequence, duplicate: true };
      for (const [id, entry] of this.seenMsgIds) if (now - entry.at >= this.duplicateWindowMs) this.seenMsgIds.delete(id); else break;
    }
    this.sequence += 1;
    if (options.msgId) this.seenMsgIds.set(options.msgId, { at: now, sequence: this.sequence });
    const message: BusMessage = { subject, data };
    setImmediate(() => {
      for (const [pattern, regex] of this.patterns) {
        if (regex.test(subject)) this.emitter.emit(pattern, message);
      }
    });
    return { sequence: this.sequence, duplicate: false };
  }

  subscribe(pattern: string, handler: (message: BusMessage) => void): Subscription {
    if (!this.patterns.has(pattern)) this.patterns.set(pattern, patternToRegex(pattern));
    this.emitter.on(pattern, handler);
    return {
      unsubscribe: () => {
        this.emitter.off(pattern, handler);
        if (this.emitter.listenerCount(pattern) === 0) this.patterns.delete(pattern);
      },
    };
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
    this.patterns.clear();
  }
}

function patternToRegex(pattern: string): RegExp {
  const body = pattern
    .split('.')
    .map((token) => (token === '*' ? '[^.]+' : token === '>' ? '.+' : token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('\\.');
  return new RegExp(`^${body}$`);
}
