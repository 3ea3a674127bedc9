import { randomBytes } from 'node:crypto';
import { StreamConfig, connect } from 'nats';
import { NatsBus } from './nats-bus';
import { subjects } from './bus';
import { BusNamespace } from './bus-namespace';
import { STREAMS } from './streams';

const url = () => {
  const u = process.env.IRONFLOW_TEST_NATS_URL;
  if (!u) throw new Error('IRONFLOW_TEST_NATS_URL is not set');
  return u;
};

const until = async (done: () => boolean, ms = 5000) => {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
};

/** The streams a test deployment created, deleted after the test (only ours, by name). */
async function deleteStreamsOf(namespace: BusNamespace): Promise<void> {
  const nc = await connect({ servers: url() });
  try {
    const jsm = await nc.jetstreamManager();
    for (const s of STREAMS) await jsm.streams.delete(namespace.stream(s.name!)).catch(() => undefined);
  } finally {
    await nc.close();
  }
}

describe('NatsBus (real NATS JetStream)', () => {
  let bus: NatsBus;
  const project = `p${randomBytes(4).toString('hex')}`;
  beforeAll(async () => { bus = await NatsBus.connect({ url: url() }); });
  afterAll(() => bus.close());

  it('creates its streams idempotently: a second connect succeeds', async () => {
    const again = await NatsBus.connect({ url: url() });
    await again.close();
  });

  it('delivers published RESULTS frames to a pattern subscriber, under their logical subject', async () => {
    const received: { subject: string; data: unknown }[] = [];
    const subject = subjects.result(project, 'default', 'run-1');
    const sub = bus.subscribe(`ironflow.${project}.default.results.run.*`, (m) => received.push(m));
    await bus.publish(subject, { status: 'completed' }, { msgId: `result-run-1-${project}` });
    await bus.publish(subject, { status: 'completed', again: true }, { msgId: `result-run-1-${project}` });
    await bus.publish(subjects.result(project, 'default', 'run-2'), { status: 'failed' });
    await until(() => received.length >= 3);
    sub.unsubscribe();
    // core subscribers see every publish; the stream keeps one message per msg-id
    expect(received).toContainEqual({ subject, data: { status: 'completed' } });
    expect(received).toContainEqual({ subject: subjects.result(project, 'default', 'run-2'), data: { status: 'failed' } });
  });

  it("answers each publish with the stream's acknowledgement: a repeated msg-id is a duplicate with the first one's sequence", async () => {
    const subject = subjects.result(project, 'default', 'run-ack');
    const first = await bus.publish(subject, { n: 1 }, { msgId: `result-run-ack-${project}` });
    const again = await bus.publish(subject, { n: 2 }, { msgId: `result-run-ack-${project}` });
    const other = await bus.publish(subject, { n: 3 });
    expect(first).toEqual({ sequence: expect.any(Number), duplicate: false });
    expect(first.sequence).toBeGreaterThan(0);
    expect(again).toEqual({ sequence: first.sequence, duplicate: true });
    expect(other.duplicate).toBe(false);
    expect(other.sequence).toBeGreaterThan(first.sequence);
  });

  it('acknowledges many publishes in flight at once, each with its own sequence', async () => {
    const acks = await Promise.all(Array.from({ length: 200 }, (_, i) => bus.publish(subjects.result(project, 'default', `many-${i}`), { i }, { msgId: `result-many-${i}-${project}` })));
    expect(new Set(acks.map((a) => a.sequence)).size).toBe(200);
    expect(acks.every((a) => !a.duplicate)).toBe(true);
  });

  it('rejects a publish to a subject no stream captures', async () => {
    await expect(bus.publish(`nostream.${project}.x`, {})).rejects.toMatchObject({ code: '503' });
  });

  it('rejects a request nobody answers in time with TIMEOUT, and drops the late answer', async () => {
    let answerLate: (() => void) | undefined;
    // Answered on the requester's own connection, whose subscription the server has before the request.
    const sub = bus.respond(`ironflow.${project}.e.slow`, 'slow', () => new Promise((resolve) => (answerLate = () => resolve({ late: true }))));
    try {
      await expect(bus.request(`ironflow.${project}.e.slow`, {}, 200)).rejects.toMatchObject({ code: 'TIMEOUT' });
      answerLate!();
      // The connection still answers later requests, and the late answer reached none of them.
      const fast = bus.respond(`ironflow.${project}.e.fast`, 'fast', async (_s, data) => data);
      try {
        await expect(bus.request(`ironflow.${project}.e.fast`, { n: 7 }, 5000)).resolves.toEqual({ n: 7 });
      } finally {
        fast.unsubscribe();
      }
    } finally {
      sub.unsubscribe();
    }
  });

  it('rejects a request still waiting when the bus closes', async () => {
    const other = await NatsBus.connect({ url: url() });
    // Answered on the same connection, whose subscription the server has before the request.
    other.respond(`ironflow.${project}.e.never`, 'never', () => new Promise(() => undefined));
    const waiting = other.request(`ironflow.${project}.e.never`, {}, 60_000);
    await other.close();
    await expect(waiting).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
  });
});

describe('Two deployments on one NATS server (IRONFLOW_CLUSTER_ID)', () => {
  const a = new BusNamespace(`ta${randomBytes(4).toString('hex')}`);
  const b = new BusNamespace(`tb${randomBytes(4).toString('hex')}`);
  let busA: NatsBus;
  let busB: NatsBus;
  let legacyBefore: Map<string, StreamConfig>;

  const streamConfigs = async (): Promise<Map<string, StreamConfig>> => {
    const nc = await connect({ servers: url() });
    try {
      const jsm = await nc.jetstreamManager();
      const out = new Map<string, StreamConfig>();
      for await (const info of jsm.streams.list()) out.set(info.config.name, info.config);
      return out;
    } finally {
      await nc.close();
    }
  };

  beforeAll(async () => {
    legacyBefore = new Map([...(await streamConfigs())].filter(([name]) => STREAMS.some((s) => s.name === name)));
    busA = await NatsBus.connect({ url: url(), namespace: a });
    busB = await NatsBus.connect({ url: url(), namespace: b });
  });
  afterAll(async () => {
    await busA.close();
    await busB.close();
    await deleteStreamsOf(a);
    await deleteStreamsOf(b);
  });

  it('gives each deployment its own streams, over subjects in its own namespace', async () => {
    const streams = await streamConfigs();
    for (const ns of [a, b]) {
      for (const s of STREAMS) {
        expect(streams.get(ns.stream(s.name!))?.subjects).toEqual(s.subjects!.map((f) => `ifx.${ns.clusterId}.${f}`));
      }
    }
  });

  it('leaves the un-namespaced streams of older installations as they were', async () => {
    const after = await streamConfigs();
    for (const [name, config] of legacyBefore) expect(after.get(name)).toEqual(config);
  });

  it("does not overwrite another deployment's stream settings when it starts", async () => {
    const name = a.stream('RESULTS');
    const before = (await streamConfigs()).get(name)!;
    const again = await NatsBus.connect({ url: url(), namespace: b });
    await again.close();
    expect((await streamConfigs()).get(name)).toEqual(before);
  });

  it("does not deliver one deployment's messages (hints, frames, run events) to the other's subscribers", async () => {
    const seenA: string[] = [];
    const seenB: string[] = [];
    const subs = [
      busA.subscribe('ironflow.*.*.steps.>', (m) => seenA.push(m.subject)),
      busA.subscribe('public.>', (m) => seenA.push(m.subject)),
      busB.subscribe('ironflow.*.*.steps.>', (m) => seenB.push(m.subject)),
      busB.subscribe('public.>', (m) => seenB.push(m.subject)),
    ];
    // Same project and env on both: only the deployment tells them apart.
    await busA.publish(subjects.stepsHint('default', 'default', 'push'), { from: 'a' });
    await busA.publish(subjects.runEvent('default', 'run-a', 'completed'), { from: 'a' });
    await busB.publish(subjects.stepsHint('default', 'default', 'push'), { from: 'b' });
    await until(() => seenA.length >= 2 && seenB.length >= 1);
    // A marker published after the others on B: once it arrives, anything of A's would have too.
    await busB.publish(subjects.runEvent('default', 'marker', 'completed'), {});
    await until(() => seenB.includes('public.default.system.run.marker.completed'));
    subs.forEach((s) => s.unsubscribe());
    expect(seenA.sort()).toEqual(['ironflow.default.default.steps.push', 'public.default.system.run.run-a.completed']);
    expect(seenB.sort()).toEqual(['ironflow.default.default.steps.push', 'public.default.system.run.marker.completed']);
  });

  it('keeps the public run events of a deployment on ifx.{clusterId}.public.{env}.system.run.…, for an external subscriber', async () => {
    const nc = await connect({ servers: url() });
    try {
      const got: string[] = [];
      const sub = nc.subscribe(`ifx.${a.clusterId}.public.>`, { callback: (_e, m) => got.push(m.subject) });
      await nc.flush();
      await busA.publish(subjects.runEvent('prod', 'r1', 'completed'), {});
      await until(() => got.length >= 1);
      sub.unsubscribe();
      expect(got).toEqual([`ifx.${a.clusterId}.public.prod.system.run.r1.completed`]);
    } finally {
      await nc.close();
    }
  });

  it("answers requests in its own deployment's queue group only: one member takes each, another deployment's requester hears no responders", async () => {
    const answeredBy: string[] = [];
    const subs = ['one', 'two'].map((member) => busA.respond('ironflow.*.*.trigger.sync', 'dispatcher', async (subject, data) => {
      answeredBy.push(member);
      return { subject, echo: data };
    }));
    try {
      const reply = await busA.request('ironflow.p.e.trigger.sync', { n: 1 }, 5000);
      expect(reply).toEqual({ subject: 'ironflow.p.e.trigger.sync', echo: { n: 1 } });
      expect(answeredBy).toHaveLength(1);
      await expect(busB.request('ironflow.p.e.trigger.sync', { n: 2 }, 5000)).rejects.toMatchObject({ code: '503' });
    } finally {
      for (const sub of subs) sub.unsubscribe();
    }
  });

  it('refuses a cluster id that could not stand in a subject or a stream name', () => {
    for (const bad of ['', 'a.b', 'a*', '>', 'a b', 'x'.repeat(64)]) expect(() => new BusNamespace(bad)).toThrow(/IRONFLOW_CLUSTER_ID/);
    expect(new BusNamespace('release-1_A').subject('public.x')).toBe('ifx.release-1_A.public.x');
  });
});
