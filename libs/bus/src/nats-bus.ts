import { JSONCodec, JetStreamClient, NatsConnection, connect } from 'nats';
import { Bus, BusMessage, PublishAck, PublishOptions, Subscription } from './bus';
import { BusNamespace } from './bus-namespace';
import { streamsOf } from './streams';

const codec = JSONCodec();

export interface NatsBusOptions {
  /** `nats://host:4222` (comma-separated for a cluster). */
  url: string;
  /** Connection name shown by the server. */
  name?: string;
  /** How long a JetStream publish waits for its acknowledgement, ms (default 5000). */
  publishTimeoutMs?: number;
  /**
   * This deployment's namespace (`IRONFLOW_CLUSTER_ID`, default `ironflow`): every subject,
   * stream and queue group of this bus carries it (see `BusNamespace`).
   */
  namespace?: BusNamespace;
}

/**
 * The NATS JetStream adapter of the bus port. Publishes go through JetStream and await the
 * acknowledgement (with `msgId` for de-duplication inside the stream's window), so a failure is
 * seen and can be counted; subscriptions are core NATS subscriptions, which see every message
 * published to the subject, stream or not.
 *
 * Callers speak logical subjects (`subjects.*`); this adapter puts each one in the deployment's
 * namespace on the way out (publish, subscribe, request) and takes it off the subjects it
 * delivers, and it creates and updates only its own deployment's streams, so two installations
 * on one NATS server never see each other's messages or settings.
 */
export class NatsBus implements Bus {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly publishTimeoutMs: number,
    /** The deployment namespace every subject and stream of this bus carries. */
    readonly namespace: BusNamespace,
  ) {}

  /**
   * Connects and creates or updates this deployment's streams (idempotent; no other stream is
   * touched). Throws when NATS cannot be reached or a stream cannot be created.
   */
  static async connect(options: NatsBusOptions): Promise<NatsBus> {
    const namespace = options.namespace ?? new BusNamespace();
    // `noAsyncTraces`: a request (every JetStream publish is one) captures no stack trace ahead of
    // time for a timeout it rarely meets; a timeout's error still says TIMEOUT, without the caller's stack.
    const nc = await connect({ servers: options.url.split(','), name: options.name ?? `ironflow-${namespace.clusterId}`, maxReconnectAttempts: -1, noAsyncTraces: true });
    const jsm = await nc.jetstreamManager();
    for (const stream of streamsOf(namespace)) {
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
    return new NatsBus(nc, nc.jetstream(), options.publishTimeoutMs ?? 5000, namespace);
  }

  async publish(subject: string, data: unknown, options: PublishOptions = {}): Promise<PublishAck> {
    if (options.unacked) {
      this.nc.publish(this.namespace.subject(subject), codec.encode(data ?? null));
      return { sequence: 0, duplicate: false };
    }
    const ack = await this.js.publish(this.namespace.subject(subject), codec.encode(data ?? null), {
      ...(options.msgId ? { msgID: options.msgId } : {}),
      timeout: this.publishTimeoutMs,
    });
    return { sequence: ack.seq, duplicate: ack.duplicate };
  }

  subscribe(pattern: string, handler: (message: BusMessage) => void): Subscription {
    const sub = this.nc.subscribe(this.namespace.subject(pattern), {
      callback: (err, msg) => {
        if (err) return;
        let data: unknown = null;
        try {
          data = codec.decode(msg.data);
        } catch {
          data = null;
        }
        handler({ subject: this.namespace.logical(msg.subject), data });
      },
    });
    return { unsubscribe: () => sub.unsubscribe() };
  }

  /** Sends a core NATS request on the logical `subject` and awaits the reply (the audit writer's path), ms timeout. */
  async request(subject: string, data: unknown, timeoutMs: number): Promise<unknown> {
    const reply = await this.nc.request(this.namespace.subject(subject), codec.encode(data ?? null), { timeout: timeoutMs });
    return codec.decode(reply.data);
  }

  /**
   * Answers core NATS requests on the logical `pattern` in this deployment's queue group
   * `{clusterId}-{queue}` (one member takes each request): `handler` gets the logical subject and
   * the decoded data, and what it resolves with is the reply. A handler that rejects sends no
   * reply: the requester sees its timeout, and so does one whose answer comes once the connection
   * closed. Requests in flight at `unsubscribe` are still answered.
   */
  respond(pattern: string, queue: string, handler: (subject: string, data: unknown) => Promise<unknown>): Subscription {
    const sub = this.nc.subscribe(this.namespace.subject(pattern), {
      queue: this.namespace.group(queue),
      callback: (err, msg) => {
        if (err || !msg.reply) return;
        let data: unknown = null;
        try {
          data = codec.decode(msg.data);
        } catch {
          data = null;
        }
        handler(this.namespace.logical(msg.subject), data).then(
          (reply) => {
            try {
              msg.respond(codec.encode(reply ?? null));
            } catch {
              // the connection closed or drains: the requester sees its timeout
            }
          },
          () => undefined,
        );
      },
    });
    return { unsubscribe: () => sub.unsubscribe() };
  }

  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    await this.nc.drain();
  }
}
