import { connect } from 'nats';

/** How many messages `stream` keeps for exactly `subject` (read from the real JetStream). */
export async function countStreamMessages(stream: string, subject: string): Promise<number> {
  const url = process.env.IRONFLOW_TEST_NATS_URL;
  if (!url) throw new Error('IRONFLOW_TEST_NATS_URL is not set');
  const nc = await connect({ servers: url });
  try {
    const jsm = await nc.jetstreamManager();
    const info = await jsm.streams.info(stream, { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  } finally {
    await nc.close();
  }
}
