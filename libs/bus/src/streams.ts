import { DiscardPolicy, RetentionPolicy, StreamConfig, nanos } from 'nats';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/**
 * The JetStream streams of DESIGN.md "NATS JetStream", created idempotently at start.
 * NATS 2.9 (Debian's) has no multi-filter consumers, so each stream keeps one subject filter.
 */
export const STREAMS: Partial<StreamConfig>[] = [
  { name: 'EVENTS', subjects: ['ironflow.*.*.events.>'], retention: RetentionPolicy.Limits, max_age: nanos(7 * DAY) },
  // Dispatch hints: consumers listen with core subscriptions, so the stream keeps only a short,
  // bounded tail (a lost hint costs one poll period).
  { name: 'STEPS', subjects: ['ironflow.*.*.steps.>'], retention: RetentionPolicy.Workqueue, max_age: nanos(60_000), duplicate_window: nanos(10_000), max_msgs: 10_000, discard: DiscardPolicy.Old },
  { name: 'RESULTS', subjects: ['ironflow.*.*.results.>'], retention: RetentionPolicy.Limits, max_age: nanos(HOUR), duplicate_window: nanos(2 * 60_000) },
  { name: 'PUBSUB', subjects: ['public.>'], retention: RetentionPolicy.Limits, max_age: nanos(7 * DAY) },
  { name: 'CANCEL', subjects: ['ironflow.*.*.cancel.>'], retention: RetentionPolicy.Limits, max_age: nanos(HOUR) },
];
