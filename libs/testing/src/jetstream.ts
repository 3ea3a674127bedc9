import { connect } from 'nats';
import { BusNamespace, STREAMS } from '@ironflow/bus';

/**
 * How many messages the deployment's stream `stream` (logical name, e.g. `RESULTS`) keeps for
 * exactly the logical `subject`, read from the real JetStream; `namespace` defaults to the
 * default deployment's, which `openTestEngine` uses.
 */
export async function countStreamMessages(stream: string, subject: string, namespace = new BusNamespace()): Promise<number> {
  const url = process.env.IRONFLOW_TEST_NATS_URL;
  if (!url) throw new Error('IRONFLOW_TEST_NATS_URL is not set');
  const nc = await connect({ servers: url });
  try {
    const jsm = await nc.jetstreamManager();
    const wire = namespace.subject(subject);
    const info = await jsm.streams.info(namespace.stream(stream), { subjects_filter: wire });
    return info.state.subjects?.[wire] ?? 0;
  } finally {
    await nc.close();
  }
}

/**
 * Deletes the JetStream streams of `namespace` (`{clusterId}_EVENTS`, …) from the NATS at `url`
 * (default IRONFLOW_TEST_NATS_URL): the clean-up of a suite or benchmark that ran an engine in a
 * namespace of its own. Streams already gone are skipped.
 */
export async function dropNamespaceStreams(namespace: BusNamespace, url = process.env.IRONFLOW_TEST_NATS_URL): Promise<void> {
  if (!url) throw new Error('IRONFLOW_TEST_NATS_URL is not set');
  const nc = await connect({ servers: url });
  try {
    const jsm = await nc.jetstreamManager();
    for (const s of STREAMS) await jsm.streams.delete(namespace.stream(s.name!)).catch(() => undefined);
  } finally {
    await nc.close();
  }
}
