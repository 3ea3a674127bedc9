/** The deployment id used when `IRONFLOW_CLUSTER_ID` is not set. */
export const DEFAULT_CLUSTER_ID = 'ironflow';

/**
 * A cluster id stands in NATS subjects (one token) and JetStream stream names, so it is letters,
 * digits, `_` and `-` only (no `.`, `*`, `>`, whitespace), 1–63 characters (a Helm release name
 * fits).
 */
export const CLUSTER_ID_PATTERN = /^[A-Za-z0-9_-]{1,63}$/;

/** The leading token of every namespaced subject; no legacy stream's subjects start with it. */
export const NAMESPACE_TOKEN = 'ifx';

/**
 * One deployment's namespace on a shared NATS server (several installations on one NATS must not
 * read each other's audit rows, wake each other's dispatchers or overwrite each other's streams).
 *
 * The scheme, applied inside the NATS adapters only (call sites keep the logical subjects of
 * `subjects.*`):
 * - subject: `ifx.{clusterId}.{logical subject}`, e.g. the RESULTS frame
 *   `ifx.acme.ironflow.{project}.{env}.results.run.{runId}` and the public run event
 *   `ifx.acme.public.{env}.system.run.{runId}.{event}`;
 * - stream: `{clusterId}_{NAME}` (`acme_RESULTS`) over `ifx.{clusterId}.{legacy filter}`;
 * - queue group and consumer: `{clusterId}-{name}`.
 *
 * Why no subjects can overlap (NATS refuses a stream whose subjects overlap another's): every
 * namespaced filter starts with the literal token `ifx`, while the un-namespaced streams of older
 * installations (EVENTS, STEPS, RESULTS, CANCEL over `ironflow.*.*.…`, PUBSUB over `public.>`)
 * start with `ironflow` or `public`; two deployments differ in the literal second token; inside
 * one deployment the filters differ as the legacy ones already did (`ifx.c.ironflow.*.*.events.>`
 * vs `ifx.c.public.>` differ at the third token). The cluster id is never a wildcard (validated).
 */
export class BusNamespace {
  private readonly prefix: string;

  /** Throws when `clusterId` does not match `CLUSTER_ID_PATTERN`. */
  constructor(readonly clusterId: string = DEFAULT_CLUSTER_ID) {
    assertClusterId(clusterId);
    this.prefix = `${NAMESPACE_TOKEN}.${clusterId}.`;
  }

  /** The wire subject (or subscription pattern) of a logical one. */
  subject(logical: string): string {
    return this.prefix + logical;
  }

  /** The logical subject of a wire subject of this namespace (unchanged when it is not one). */
  logical(wire: string): string {
    return wire.startsWith(this.prefix) ? wire.slice(this.prefix.length) : wire;
  }

  /** A JetStream stream name of this deployment: `{clusterId}_{name}`. */
  stream(name: string): string {
    return `${this.clusterId}_${name}`;
  }

  /** A queue group or durable consumer name of this deployment: `{clusterId}-{name}`. */
  group(name: string): string {
    return `${this.clusterId}-${name}`;
  }
}

/** Throws an Error naming `IRONFLOW_CLUSTER_ID` when `id` cannot stand in a subject and a stream name. */
export function assertClusterId(id: string): void {
  if (!CLUSTER_ID_PATTERN.test(id)) {
    throw new Error(`IRONFLOW_CLUSTER_ID ${JSON.stringify(id)}: use 1-63 letters, digits, '_' or '-' (it stands in NATS subjects and stream names)`);
  }
}
