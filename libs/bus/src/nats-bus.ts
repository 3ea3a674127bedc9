import { ErrorCode, JSONCodec, NatsConnection, NatsError, connect, headers } from 'nats';
import { Bus, BusMessage, PublishAck, PublishOptions, Subscription } from './bus';
import { BusNamespace } from './bus-namespace';
import { NatsReplies } from './nats-replies';
import { streamsOf } from './streams';

const codec = JSONCodec();

/** A JetStream publish acknowledgement, or the stream's refusal. */
interface JetStreamAck {
  stream?: string;
  seq?: number;
  duplicate?: boolean;
  error?: { code?: number; description?: string };
}

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
 * acknowledgement (with `msgId` for de-duplication inside the stream's window, the `Nats-Msg-Id`
 * header), so a failure is seen and can be counted; subscriptions are core NATS subscriptions,
 * which see every message published to the subject, stream or not. Acknowledgements and request
 * answers come back through one reply subscription of the connection ({@link NatsReplies}).
 *
 * Callers speak logical subjects (`subjects.*`); this adapter puts each one in the deployment's
 * namespace on the way out (publish, subscribe, request) and takes it off the subjects it
 * delivers, and it creates and updates only its own deployment's streams, so two installations
 * on one NATS server never see each other's messages or settings.
 */
export class NatsBus implements Bus {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly replies: NatsReplies,
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
    // `noAsyncTraces`: a request of nats.js's own (the stream management below) captures no stack
    // trace ahead of time for a timeout it rarely meets.
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
    return new NatsBus(nc, new NatsReplies(nc), options.publishTimeoutMs ?? 5000, namespace);
  }

  /**
   * Publishes `data` (JSON) to the logical `subject`. Acknowledged (the default): resolves with
   * the stream's acknowledgement; rejects with a `NatsError` when no stream captures the subject
   * (code `503`), the stream refuses the message (the stream's error code and description), or no
   * acknowledgement comes within `publishTimeoutMs` (`TIMEOUT`). `unacked`: a core publish.
   */
  async publish(subject: string, data: unknown, options: PublishOptions = {}): Promise<PublishAck> {
    if (options.unacked) {
      this.nc.publish(this.namespace.subject(subject), codec.encode(data ?? null));
      return { sequence: 0, duplicate: false };
    }
    let msgIdHeader;
    if (options.msgId) {
      msgIdHeader = headers();
      msgIdHeader.set('Nats-Msg-Id', options.msgId);
    }
    const answer = await this.replies.request(this.namespace.subject(subject), codec.encode(data ?? null), this.publishTimeoutMs, msgIdHeader);
    const ack = codec.decode(answer.data) as JetStreamAck;
    if (ack.error) throw new NatsError(ack.error.description || 'JetStream refused the message', String(ack.error.code ?? ErrorCode.Unknown));
    if (!ack.stream || typeof ack.seq !== 'number') throw NatsError.errorForCode(ErrorCode.JetStreamInvalidAck);
    return { sequence: ack.seq, duplicate: ack.duplicate ?? false };
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

  /**
   * Sends a core NATS request on the logical `subject` and resolves with the decoded reply (the
   * audit writer's and the forwarded trigger's path). Rejects with code `503` when nobody answers
   * the subject, `TIMEOUT` after `timeoutMs` (ms) without an answer.
   */
  async request(subject: string, data: unknown, timeoutMs: number): Promise<unknown> {
    const reply = await this.replies.request(this.namespace.subject(subject), codec.encode(data ?? null), timeoutMs);
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

  /** Drains the connection (requests in flight may still be answered), then rejects any request still waiting. */
  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    try {
      await this.nc.drain();
    } finally {
      this.replies.close();
    }
  }
}
