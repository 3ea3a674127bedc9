import { DiscardPolicy, RetentionPolicy, StreamConfig, nanos } from 'nats';
import { BusNamespace } from './bus-namespace';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/**
 * The JetStream streams of DESIGN.md "NATS JetStream", by logical name and logical subject filter;
 * `streamsOf` puts them in a deployment's namespace. NATS 2.9 (Debian's) has no multi-filter
 * consumers, so each stream keeps one subject filter.
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

/** The streams of one deployment: `{clusterId}_{NAME}` over `ifx.{clusterId}.{filter}`. */
export function streamsOf(namespace: BusNamespace): Partial<StreamConfig>[] {
  return STREAMS.map((s) => ({ ...s, name: namespace.stream(s.name!), subjects: s.subjects!.map((f) => namespace.subject(f)) }));
}
