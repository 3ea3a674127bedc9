/**
 * Golden wire tests of issue 9 items 5 and 6, from WIRE-PROTOCOL.md 5.2, 5.4, 5.5, 5.6 and
 * docs/SUBSCRIPTIONS.md: PauseRun / GetPausedState / InjectStepOutput / ResumeRun as raw Connect
 * JSON, `POST /api/v1/runs/resume`, PubSubService Publish / ListTopics, and the `<base>/ws`
 * subscription protocol as raw WebSocket JSON frames. Nothing here comes from `libs/sdk`.
 */
import { WebSocket } from 'ws';
import { connect, findNulls, isIsoTime, rest, startWireEngine, uid, waitFor, WIRE_STORES, WireEngine } from '../support/wire-harness';

async function pubsub(base: string, method: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/ironflow.v1.PubSubService/${method}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** A raw WebSocket client that records every server frame. */
async function openSocket(url: string): Promise<{ ws: WebSocket; frames: any[]; send(msg: unknown): void; next(match: (f: any) => boolean): Promise<any> }> {
  const ws = new WebSocket(url);
  const frames: any[] = [];
  ws.on('message', (data) => frames.push(JSON.parse(data.toString())));
  await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
  return {
    ws,
    frames,
    send: (msg) => ws.send(JSON.stringify(msg)),
    next: (match) => waitFor('a WebSocket frame', async () => frames.find(match)),
  };
}

describe.each(WIRE_STORES)('wire: pause, resume, inject and pub/sub (%s)', (store) => {
  let engine: WireEngine;
  let wsBase: string;
  beforeAll(async () => {
    engine = await startWireEngine(store);
    wsBase = engine.url.replace(/^http/, 'ws');
  });
  afterAll(() => engine?.close());

  async function pullFunction(env: string) {
    const fnId = uid('paused-fn');
    const event = uid('go');
    const worker = uid('worker');
    const headers = { 'x-ironflow-environment': env };
    expect((await connect(engine.url, 'RegisterFunction', { id: fnId, triggers: [{ event }], preferredMode: 'EXECUTION_MODE_PULL' }, headers)).status).toBe(200);
    expect((await rest(engine.url, 'POST', `/api/v1/workers/${worker}/register`, { worker_id: worker, function_ids: [fnId], max_concurrent_jobs: 10, labels: {} }, env)).status).toBe(200);
    const runId = (await connect(engine.url, 'Trigger', { event, data: { n: 1 } }, headers)).json.runIds[0] as string;
    const poll = async () => {
      const r = await rest(engine.url, 'GET', `/api/v1/workers/${worker}/jobs?available=1`, undefined, env);
      return r.status === 200 && Array.isArray(r.json?.jobs) ? r.json.jobs : [];
    };
    return { runId, headers, poll };
  }

  it('PauseRun parks a queued run; GetPausedState and InjectStepOutput speak JSON text; REST resume queues it with the injected step', async () => {
    const env = uid('e');
    const { runId, headers, poll } = await pullFunction(env);
    const socket = await openSocket(`${wsBase}/ws?env=${env}`);
    socket.send({ type: 'subscribe', subscription: { pattern: `system.run.${runId}.*` } });
    await socket.next((f) => f.type === 'subscription_result' && f.results[0].status === 'ok');

    const paused = await connect(engine.url, 'PauseRun', { run_id: runId, reason: 'inspect' }, headers);
    expect(paused).toMatchObject({ status: 200, json: { status: 'paused' } });
    const run = (await connect(engine.url, 'GetRun', { id: runId }, headers)).json;
    expect(run).toMatchObject({ status: 'paused', pauseRequested: true, pauseReason: 'inspect' });
    expect(findNulls(run)).toEqual([]);
    expect(await poll()).toEqual([]);

    const fetchStep = `${runId}:fetch:0`;
    const injected = await connect(engine.url, 'InjectStepOutput', { run_id: runId, step_id: fetchStep, new_output: JSON.stringify({ price: 12 }), reason: 'manual' }, headers);
    expect(injected).toMatchObject({ status: 200, json: { stepId: fetchStep, previousOutput: '' } });
    const again = await connect(engine.url, 'InjectStepOutput', { run_id: runId, step_id: fetchStep, new_output: '{"price":13}', reason: '' }, headers);
    expect(again.json).toEqual({ stepId: fetchStep, previousOutput: '{"price":12}' });

    const state = await connect(engine.url, 'GetPausedState', { run_id: runId }, headers);
    expect(state.status).toBe(200);
    expect(state.json).toMatchObject({ nextStepHint: '', pauseReason: 'inspect' });
    expect(state.json.steps).toHaveLength(1);
    expect(state.json.steps[0]).toMatchObject({ id: fetchStep, name: 'fetch', injected: true, stepType: 'run', status: 'completed' });
    expect(JSON.parse(state.json.steps[0].output)).toEqual({ price: 13 });
    expect(isIsoTime(state.json.steps[0].completedAt)).toBe(true);

    const resumed = await rest(engine.url, 'POST', '/api/v1/runs/resume', { run_id: runId, from_step: '' }, env);
    expect(resumed.status).toBe(201);
    expect(resumed.json).toMatchObject({ id: runId, status: 'waiting_for_capacity' });
    const jobs = await waitFor('the resumed job', async () => { const j = await poll(); return j.length ? j : undefined; });
    expect(jobs[0].completed_steps).toEqual([{ step_id: fetchStep, name: 'fetch', output: { price: 13 } }]);

    await socket.next((f) => f.type === 'event' && f.topic === `system.run.${runId}.paused`);
    const resumedEvent = await socket.next((f) => f.type === 'event' && f.topic === `system.run.${runId}.resumed`);
    expect(resumedEvent.data).toMatchObject({ runId, status: 'waiting_for_capacity' });
    socket.ws.close();
  });

  it('answers a running run pause_requested, and refuses bad pause calls with codes', async () => {
    const env = uid('e');
    const { runId, headers, poll } = await pullFunction(env);
    expect((await poll())).toHaveLength(1);
    expect((await connect(engine.url, 'PauseRun', { run_id: runId }, headers)).json).toEqual({ status: 'pause_requested' });
    const notPaused = await connect(engine.url, 'GetPausedState', { run_id: runId }, headers);
    expect(notPaused).toMatchObject({ status: 400, json: { code: 'failed_precondition', ironflowCode: 'RUN_NOT_PAUSED' } });
    const badJson = await connect(engine.url, 'InjectStepOutput', { run_id: runId, step_id: `${runId}:x:0`, new_output: 'not json' }, headers);
    expect(badJson).toMatchObject({ status: 400, json: { code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' } });
    expect((await connect(engine.url, 'PauseRun', { run_id: 'no-such-run' }, headers))).toMatchObject({ status: 404, json: { ironflowCode: 'RUN_NOT_FOUND' } });
    const fromStep = await rest(engine.url, 'POST', '/api/v1/runs/resume', { run_id: runId, from_step: `${runId}:x:0` }, env);
    expect(fromStep).toMatchObject({ status: 400, json: { code: 'VALIDATION_ERROR' } });
    expect((await connect(engine.url, 'ResumeRun', { run_id: runId }, headers)).json).toMatchObject({ id: runId, status: 'running' });
    expect((await connect(engine.url, 'GetRun', { id: runId }, headers)).json.pauseRequested).toBe(false);
  });

  it('Publish stores a message (sequence as a uint64 string), dedupes an idempotency key, counts topics, and delivers to a WebSocket subscriber', async () => {
    const env = uid('e');
    const headers = { 'x-ironflow-environment': env };
    const socket = await openSocket(`${wsBase}/ws?env=${env}`);
    socket.send({ type: 'subscribe', subscription: { pattern: 'topic:orders.*', options: { includeMetadata: true } } });
    const subscribed = await socket.next((f) => f.type === 'subscription_result');
    expect(subscribed.results).toEqual([{ pattern: 'topic:orders.*', status: 'ok', subscriptionId: expect.stringMatching(/^sub_/) }]);
    const subscriptionId = subscribed.results[0].subscriptionId;

    const first = await pubsub(engine.url, 'Publish', { topic: 'orders.created', data: { id: 1 } }, { ...headers, 'x-ironflow-run-id': 'run-abc' });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ eventId: expect.any(String), sequence: expect.stringMatching(/^[1-9]\d*$/), duplicate: false });
    const event = await socket.next((f) => f.type === 'event' && f.eventId === first.json.eventId);
    expect(event).toEqual({ type: 'event', subscriptionId, topic: 'orders.created', data: { id: 1 }, eventId: first.json.eventId, meta: { timestamp: expect.any(String) } });
    expect(isIsoTime(event.meta.timestamp)).toBe(true);

    const keyed = await pubsub(engine.url, 'Publish', { topic: 'orders.created', data: 'plain text', idempotencyKey: 'order-2' }, headers);
    const repeat = await pubsub(engine.url, 'Publish', { topic: 'orders.created', data: 'plain text', idempotency_key: 'order-2' }, headers);
    expect(repeat.json).toEqual({ eventId: keyed.json.eventId, sequence: keyed.json.sequence, duplicate: true });
    expect(Number(keyed.json.sequence)).toBeGreaterThan(Number(first.json.sequence));
    expect((await socket.next((f) => f.eventId === keyed.json.eventId)).data).toBe('plain text');
    await pubsub(engine.url, 'Publish', { topic: 'invoices.sent', data: {} }, headers);

    const topics = await pubsub(engine.url, 'ListTopics', {}, headers);
    expect(topics.status).toBe(200);
    expect(topics.json.topics.map((t: any) => [t.name, t.messageCount, t.consumerCount])).toEqual([['invoices.sent', '1', 0], ['orders.created', '2', 0]]);
    for (const t of topics.json.topics) expect(isIsoTime(t.firstMessageAt) && isIsoTime(t.lastMessageAt)).toBe(true);
    // Another environment sees neither the topics nor the messages.
    expect((await pubsub(engine.url, 'ListTopics', {}, { 'x-ironflow-environment': uid('other') })).json).toEqual({ topics: [] });
    expect(socket.frames.filter((f) => f.type === 'event' && f.topic === 'invoices.sent')).toEqual([]);

    // The session handles a connection's frames in order, so the answer to a later subscribe means
    // the unsubscribe was applied; a message published after `after` on that later subscription
    // arrives behind anything `after` would have delivered (one bus connection, one subscriber).
    socket.send({ type: 'unsubscribe', subscriptionId });
    socket.send({ type: 'subscribe', subscription: { pattern: 'topic:barrier.*' } });
    expect((await socket.next((f) => f.type === 'subscription_result' && f.results[0].pattern === 'topic:barrier.*')).results[0].status).toBe('ok');
    const after = await pubsub(engine.url, 'Publish', { topic: 'orders.created', data: { id: 3 } }, headers);
    const barrier = await pubsub(engine.url, 'Publish', { topic: 'barrier.reached', data: {} }, headers);
    await socket.next((f) => f.type === 'event' && f.eventId === barrier.json.eventId);
    expect(socket.frames.find((f) => f.eventId === after.json.eventId)).toBeUndefined();
    socket.ws.close();
  });

  it('refuses what the engine does not act on: subscription options, patterns, bad topics, other paths and RPCs', async () => {
    const socket = await openSocket(`${wsBase}/ws`);
    socket.send({ type: 'subscribe', subscription: { pattern: 'topic:orders.>', options: { replay: 5, consumerGroup: 'g', ackMode: 'manual' } } });
    const refused = await socket.next((f) => f.type === 'subscription_result');
    expect(refused.results[0]).toMatchObject({ pattern: 'topic:orders.>', status: 'error', code: 'VALIDATION_ERROR' });
    expect(refused.results[0].message).toMatch(/replay.*consumerGroup.*ackMode/);
    socket.send({ type: 'subscribe', subscription: { pattern: 'events:order.placed' } });
    await socket.next((f) => f.type === 'subscription_result' && f.results[0].pattern === 'events:order.placed' && f.results[0].status === 'error');
    socket.ws.send('not json');
    await socket.next((f) => f.type === 'error' && f.code === 'INVALID_JSON');
    socket.ws.close();

    expect(await pubsub(engine.url, 'Publish', { topic: 'orders..created', data: {} })).toMatchObject({ status: 400, json: { code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR' } });
    expect(await pubsub(engine.url, 'Publish', { topic: 'orders.*', data: {} })).toMatchObject({ status: 400 });
    expect(await pubsub(engine.url, 'Subscribe', { pattern: 'x' })).toMatchObject({ status: 404, json: { code: 'unimplemented' } });

    const other = new WebSocket(`${wsBase}/not-ws`);
    const status = await new Promise<number>((resolve) => other.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)));
    expect(status).toBe(404);
    const badEnv = new WebSocket(`${wsBase}/ws?env=${encodeURIComponent('no spaces')}`);
    expect(await new Promise<number>((resolve) => badEnv.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)))).toBe(400);
  });
});
