/**
 * The bus port (DESIGN.md "NATS JetStream"): hints and announcements that may be lost or
 * repeated. Nothing correct depends on a message arriving; every consumer has a store read
 * or a pass that reaches the same result.
 */
export interface BusMessage {
  subject: string;
  data: unknown;
}

export interface PublishOptions {
  /** JetStream message id for de-duplication (e.g. `result-{runId}`). */
  msgId?: string;
  /**
   * A hint nothing counts (e.g. a dispatch hint): the publish does not wait for the stream's
   * acknowledgement (on NATS a core publish, which the stream still stores), so it resolves with
   * sequence 0 once the message is handed to the connection; a lost message is not seen.
   */
  unacked?: boolean;
}

/** What the bus answers a stored publish: the stream sequence, and whether `msgId` repeated an earlier message (whose sequence it then is). */
export interface PublishAck {
  sequence: number;
  duplicate: boolean;
}

export interface Subscription {
  unsubscribe(): void;
}

export interface Bus {
  /** Publishes; rejects when the bus did not accept the message. */
  publish(subject: string, data: unknown, options?: PublishOptions): Promise<PublishAck>;
  /** Subscribes to an exact subject or a pattern with `*` / `>` tokens. */
  subscribe(pattern: string, handler: (message: BusMessage) => void): Subscription;
  close(): Promise<void>;
}

/**
 * Logical subject names, always carrying project and env. The NATS adapter puts each in the
 * deployment's namespace on the wire (`ifx.{clusterId}.{subject}`, see `BusNamespace`); callers
 * and subscribers see only these.
 */
export const subjects = {
  result: (project: string, env: string, runId: string) => `ironflow.${project}.${env}.results.run.${runId}`,
  stepsHint: (project: string, env: string, mode: string) => `ironflow.${project}.${env}.steps.${mode}`,
  runEvent: (env: string, runId: string, event: string) => `public.${env}.system.run.${runId}.${event}`,
  /** A developer pub/sub topic (PUBSUB stream); `topic` is dot-separated tokens, or a pattern. */
  topic: (project: string, env: string, topic: string) => `public.${project}.${env}.topic.${topic}`,
};
