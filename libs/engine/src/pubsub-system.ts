import { createHash, randomUUID } from 'node:crypto';
import { subjects } from '@ironflow/bus';
import { CallScope, EngineError, PubSubApi, PublishInput, PublishOutput, TopicMessage, TopicView } from '@ironflow/contracts';
import { topicsSql } from '@ironflow/store';
import { checkPayload } from './payload-limits';
import { EngineResources } from './resources';

/** A topic: dot-separated tokens of letters, digits, `_` and `-` (it stands in a subject). */
const TOPIC = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const MAX_TOPIC_CHARS = 256;
/** An idempotency key: at most 255 bytes, no whitespace or control characters. */
const IDEMPOTENCY_KEY = /^[^\s\x00-\x1f\x7f]+$/;
const MAX_KEY_BYTES = 255;

/**
 * Developer pub/sub (WIRE-PROTOCOL.md 5.2 `Publish`, 5.4 `step.publish`; `ListTopics`). A message
 * is stored in the `PUBSUB` JetStream stream on `public.{project}.{env}.topic.{topic}` through the
 * bus port (the in-process bus under `ironflow dev`), as a {@link TopicMessage}; it starts no run.
 * An idempotency key becomes the JetStream msg-id, so a repeat within the stream's duplicate
 * window (2 min) stores nothing and answers the first message's id and sequence
 * (`duplicate: true`). Topic counts live in the `topics` table, updated after each stored
 * publish, best effort: a failed count is logged and never fails the publish.
 */
export class PubSubSystem implements PubSubApi {
  constructor(private readonly r: EngineResources) {}

  async publish(scope: CallScope, input: PublishInput): Promise<PublishOutput> {
    const topic = checkTopic(input.topic);
    const key = input.idempotencyKey ? checkIdempotencyKey(input.idempotencyKey) : undefined;
    checkPayload('data', input.data ?? null, this.r.config.maxPayloadBytes);
    const eventId = key ? keyedEventId(scope, topic, key) : randomUUID();
    const message: TopicMessage = {
      eventId,
      topic,
      data: input.data ?? null,
      publishedAt: new Date(this.r.clock.now()).toISOString(),
      ...(input.runId ? { runId: input.runId.slice(0, 256) } : {}),
    };
    let ack;
    try {
      ack = await this.r.bus.publish(subjects.topic(scope.project, scope.env, topic), message, key ? { msgId: `publish-${eventId}` } : {});
    } catch (err) {
      this.r.logger.warn('publish not stored by the bus', { topic, error: String(err) });
      throw new EngineError('INTERNAL_ERROR', `topic ${topic}: the message was not stored (the bus did not acknowledge it); publish again`);
    }
    if (!ack.duplicate) {
      try {
        await this.r.store.unitOfWork('recordPublish', (tx) => topicsSql.recordPublish(tx, scope.project, scope.env, topic));
      } catch (err) {
        this.r.logger.warn('topic count not updated; the message was published', { topic, error: String(err) });
      }
    }
    return { eventId, sequence: ack.sequence, duplicate: ack.duplicate };
  }

  async listTopics(scope: CallScope): Promise<TopicView[]> {
    const topics = await this.r.store.read('listTopics', (tx) => topicsSql.listTopics(tx, scope.project, scope.env));
    return topics.map((t) => ({
      name: t.name,
      messageCount: t.messageCount,
      consumerCount: 0,
      firstMessageAt: new Date(t.firstMessageAt).toISOString(),
      lastMessageAt: new Date(t.lastMessageAt).toISOString(),
    }));
  }
}

/** Throws `VALIDATION_ERROR` unless `topic` is dot-separated tokens of `[A-Za-z0-9_-]`, at most 256 characters. */
export function checkTopic(topic: unknown): string {
  if (typeof topic !== 'string' || !TOPIC.test(topic) || topic.length > MAX_TOPIC_CHARS) {
    throw new EngineError('VALIDATION_ERROR', `topic ${JSON.stringify(topic)}: dot-separated tokens of letters, digits, "_" and "-", at most ${MAX_TOPIC_CHARS} characters (no wildcards)`);
  }
  return topic;
}

function checkIdempotencyKey(key: unknown): string {
  if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key) || Buffer.byteLength(key) > MAX_KEY_BYTES) {
    throw new EngineError('VALIDATION_ERROR', `idempotency_key: at most ${MAX_KEY_BYTES} bytes, no whitespace or control characters`);
  }
  return key;
}

/** The same key on the same topic always names the same message. */
function keyedEventId(scope: CallScope, topic: string, key: string): string {
  const hex = createHash('sha256').update(`${scope.project}\u0000${scope.env}\u0000${topic}\u0000${key}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
