import type { CallScope } from './client-api';

/**
 * Developer pub/sub (`ironflow.v1.PubSubService`, WIRE-PROTOCOL.md 5.2 and 5.4) and the
 * subscription protocol of `<base>/ws` (docs/SUBSCRIPTIONS.md), transport-free.
 */

/** `Publish`: `topic` (dot-separated tokens), any JSON `data`, an optional idempotency key. */
export interface PublishInput {
  topic: string;
  data: unknown;
  /** Up to 255 bytes, no whitespace or control characters; a repeat within 2 min stores nothing. */
  idempotencyKey?: string;
  /** The run that published (`X-Ironflow-Run-ID`), kept with the message. */
  runId?: string;
}

/** `Publish`'s answer: the message id, its JetStream sequence, and whether the key repeated one. */
export interface PublishOutput {
  eventId: string;
  sequence: number;
  duplicate: boolean;
}

/** One topic as `ListTopics` shows it; times ISO-8601. `consumerCount` is always 0 (no consumer groups). */
export interface TopicView {
  name: string;
  messageCount: number;
  consumerCount: number;
  firstMessageAt?: string;
  lastMessageAt?: string;
}

export interface PubSubApi {
  /** Throws `VALIDATION_ERROR` (topic, key), `PAYLOAD_TOO_LARGE`; `INTERNAL_ERROR` when the bus refused the message. */
  publish(scope: CallScope, input: PublishInput): Promise<PublishOutput>;
  listTopics(scope: CallScope): Promise<TopicView[]>;
}

/** What one published message carries on the bus (subject `public.{project}.{env}.topic.{topic}`). */
export interface TopicMessage {
  eventId: string;
  topic: string;
  data: unknown;
  /** ISO-8601 publish time (store clock). */
  publishedAt: string;
  runId?: string;
}

// ---------------------------------------------------------------------------------------------
// The `<base>/ws` subscription protocol (JSON text frames)

/** Client → server. `ack` is answered with an error: there are no consumer groups. */
export type WsClientMessage =
  | { type: 'subscribe'; subscription: { pattern: string; options?: WsSubscribeOptions } }
  | { type: 'unsubscribe'; subscriptionId: string }
  | { type: 'ack'; eventId: string; ackType?: string; subscriptionId?: string };

export interface WsSubscribeOptions {
  replay?: number;
  startAfterSequence?: number | string;
  includeMetadata?: boolean;
  filter?: string;
  consumerGroup?: string;
  ackMode?: string;
  backpressure?: string;
  namespace?: string;
}

/** Server → client. */
export type WsServerMessage =
  | { type: 'subscription_result'; results: { pattern: string; status: 'ok' | 'error'; subscriptionId?: string; code?: string; message?: string }[] }
  | { type: 'event'; subscriptionId: string; topic: string; data: unknown; meta?: { timestamp: string }; eventId?: string }
  | { type: 'subscription_error'; subscriptionId: string; code: string; message: string; retrying: boolean }
  | { type: 'error'; code: string; message: string };
