import { randomBytes } from 'node:crypto';
import { NatsBus } from './nats-bus';
import { subjects } from './bus';

const url = () => {
  const u = process.env.IRONFLOW_TEST_NATS_URL;
  if (!u) throw new Error('IRONFLOW_TEST_NATS_URL is not set');
  return u;
};

describe('NatsBus (real NATS JetStream)', () => {
  let bus: NatsBus;
  const project = `p${randomBytes(4).toString('hex')}`;
  beforeAll(async () => { bus = await NatsBus.connect({ url: url() }); });
  afterAll(() => bus.close());

  it('creates its streams idempotently: a second connect succeeds', async () => {
    const again = await NatsBus.connect({ url: url() });
    await again.close();
  });

  it('delivers published RESULTS frames to a pattern subscriber', async () => {
    const received: unknown[] = [];
    const subject = subjects.result(project, 'default', 'run-1');
    const sub = bus.subscribe(`ironflow.${project}.default.results.run.*`, (m) => received.push(m.data));
    await bus.publish(subject, { status: 'completed' }, { msgId: `result-run-1-${project}` });
    await bus.publish(subject, { status: 'completed', again: true }, { msgId: `result-run-1-${project}` });
    await bus.publish(subjects.result(project, 'default', 'run-2'), { status: 'failed' });
    const deadline = Date.now() + 5000;
    while (received.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    sub.unsubscribe();
    // core subscribers see every publish; the stream keeps one message per msg-id
    expect(received).toContainEqual({ status: 'completed' });
    expect(received).toContainEqual({ status: 'failed' });
  });

  it('rejects a publish to a subject no stream captures', async () => {
    await expect(bus.publish(`nostream.${project}.x`, {})).rejects.toThrow();
  });
});
