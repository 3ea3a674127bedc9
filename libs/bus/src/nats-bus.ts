import { JSONCodec, JetStreamClient, NatsConnection, connect } from 'nats';
import { Bus, BusMessage, PublishAck, PublishOptions, Subscription } from './bus';
import { STREAMS } from './streams';

const codec = JSONCodec();

export interface NatsBusOptions {
  /** `nats://host:4222` (comma-separated for a cluster). */
  url: string;
  /** Connection name shown by the server. */
  name?: string;
  /** How long a JetStream publish waits for its acknowledgement, ms (default 5000). */
  publishTimeoutMs?: number;
}

/**
 * The NATS JetStream adapter of the bus port. Publishes go through JetStream and await the
 * acknowledgement (with `msgId` for de-duplication inside the stream's window), so a failure is
 * seen and can be counted; subscriptions are core NATS subscriptions, which see every message
 * published to the subject, stream or not.
 */
export class NatsBus implements Bus {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly publishTimeoutMs: number,
  ) {}

  /** Connects and creates the streams (idempotent). Throws when NATS cannot be reached. */
  static async connect(options: NatsBusOptions): Promise<NatsBus> {
    const nc = await connect({ servers: options.url.split(','), name: options.name ?? 'ironflow', maxReconnectAttempts: -1 });
    const jsm = await nc.jetstreamManager();
    for (const stream of STREAMS) {
      try {
        await jsm.streams.info(stream.name!);
        await jsm.streams.update(stream.name!, stream);
      } catch (err) {
        if (!String(err).includes('stream not found')) throw err;
        try {
          await jsm.streams.add(stream);
        } catch (addErr) {
          // another process created it between our check and our add
          if (!String(addErr).includes('already in use')) throw addErr;
        }
      }
    }
    return new NatsBus(nc, nc.jetstream(), options.publishTimeoutMs ?? 5000);
  }

  async publish(subject: string, data: unknown, options: PublishOptions = {}): Promise<PublishAck> {
    const ack = await this.js.publish(subject, codec.encode(data ?? null), {
      ...(options.msgId ? { msgID: options.msgId } : {}),
      timeout: this.publishTimeoutMs,
    });
    return { sequence: ack.seq, duplicate: ack.duplicate };
  }

  subscribe(pattern: string, handler: (message: BusMessage) => void): Subscription {
    const sub = this.nc.subscribe(pattern, {
      callback: (err, msg) => {
        if (err) return;
        let data: unknown = null;
        try {
          data = codec.decode(msg.data);
        } catch {
          data = null;
        }
        handler({ subject: msg.subject, data });
      },
    });
    return { unsubscribe: () => sub.unsubscribe() };
  }

  /** Sends a core NATS request and awaits the reply (the audit writer's path), ms timeout. */
  async request(subject: string, data: unknown, timeoutMs: number): Promise<unknown> {
    const reply = await this.nc.request(subject, codec.encode(data ?? null), { timeout: timeoutMs });
    return codec.decode(reply.data);
  }

  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    await this.nc.drain();
  }
}
