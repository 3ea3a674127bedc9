/**
 * Our SDK against a real engine (`ironflow dev`'s services on SQLite, in-process bus):
 * `client.pauseRun/resumeRun/getPausedState/injectStepOutput`, `client.publish/listTopics/
 * subscribe`, and `step.publish` inside a pull worker.
 */
import { createClient, createFunction, createWorker, Worker } from '@ironflow/sdk';
import { TestServer, startTestServer, waitFor } from '@ironflow/testing';
import { randomBytes } from 'node:crypto';

describe('SDK: pause, resume, inject and publish/subscribe against the engine', () => {
  let engine: TestServer;
  let worker: Worker | undefined;
  const env = `e${randomBytes(4).toString('hex')}`;
  beforeAll(async () => { engine = await startTestServer('sqlite', 'ironflow_sdk'); });
  afterEach(async () => { await worker?.stop(); worker = undefined; });
  afterAll(() => engine?.close());

  const client = () => createClient({ serverUrl: engine.server.url, environment: env });

  it('pauses a queued run, injects a step, resumes it, and the worker memoizes the injected output', async () => {
    const seen: unknown[] = [];
    const fn = createFunction({ id: `priced-${env}`, triggers: [{ event: `price-${env}` }] }, async ({ step }) => {
      const price = await step.run('fetch-price', () => ({ price: 10 }));
      seen.push(price);
      return price;
    });
    const c = client();
    await c.registerFunction(fn);
    const { runIds } = await c.emit(`price-${env}`, {});
    const runId = runIds[0];
    expect(await c.pauseRun(runId, 'hold')).toEqual({ status: 'paused' });
    expect(await c.injectStepOutput(runId, `${runId}:fetch-price:0`, { price: 99 }, 'manual')).toEqual({ stepId: `${runId}:fetch-price:0`, previousOutput: null });
    const state = await c.getPausedState(runId);
    expect(state).toMatchObject({ pauseReason: 'hold', nextStepHint: '', steps: [{ name: 'fetch-price', output: { price: 99 }, injected: true }] });

    worker = createWorker({ serverUrl: engine.server.url, environment: env, functions: [fn], pollIntervalMs: 50 });
    await worker.start();
    expect((await c.resumeRun(runId)).status).toBe('waiting_for_capacity');
    const done = await waitFor('the resumed run', async () => { const r = await c.getRun(runId); return r.status === 'completed' ? r : undefined; });
    expect(done.output).toEqual({ price: 99 });
    expect(seen).toEqual([{ price: 99 }]);
  });

  it('publishes from a step and from the client to a subscriber, and lists the topics', async () => {
    const c = client();
    const events: { topic: string; data: unknown }[] = [];
    const sub = await c.subscribe(`topic:shipping.>`, { onEvent: (e) => events.push({ topic: e.topic, data: e.data }), includeMetadata: true });
    const fn = createFunction({ id: `shipper-${env}`, triggers: [{ event: `ship-${env}` }] }, async ({ step, event }) => step.publish('shipping.label', { order: (event.data as { order: string }).order }));
    await c.registerFunction(fn);
    worker = createWorker({ serverUrl: engine.server.url, environment: env, functions: [fn], pollIntervalMs: 50 });
    await worker.start();
    const { runIds } = await c.emit(`ship-${env}`, { order: 'A-1' });
    const run = await waitFor('the publishing run', async () => { const r = await c.getRun(runIds[0]); return r.status === 'completed' ? r : undefined; });
    expect(run.output).toMatchObject({ eventId: expect.any(String), duplicate: false });
    expect((run.output as { sequence: number }).sequence).toBeGreaterThan(0);

    const direct = await c.publish('shipping.done', 'ok', { idempotencyKey: 'done-1' });
    expect(await c.publish('shipping.done', 'ok', { idempotencyKey: 'done-1' })).toEqual({ ...direct, duplicate: true });
    await waitFor('both messages', () => (events.length >= 2 ? true : undefined));
    expect(events).toEqual([{ topic: 'shipping.label', data: { order: 'A-1' } }, { topic: 'shipping.done', data: 'ok' }]);
    expect((await c.listTopics()).map((t) => [t.name, t.messageCount])).toEqual([['shipping.done', 1], ['shipping.label', 1]]);
    sub.unsubscribe();

    await expect(c.subscribe('events:x', { onEvent: () => undefined })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});
