import { subjects } from '@ironflow/bus';
import { WsServerMessage } from '@ironflow/contracts';
import { SubscriptionSession } from '@ironflow/engine';
import { STORES, TestEngine, countStreamMessages, openTestEngine, waitFor } from '@ironflow/testing';

/**
 * Developer pub/sub on real NATS JetStream (issue 9 item 6): Publish stores in the PUBSUB stream,
 * an idempotency key dedupes inside the stream's window, topic counts live in the store, and a
 * subscription session delivers what any node publishes.
 */
describe.each(STORES)('publish / subscribe over NATS [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => { t = await openTestEngine(dialect, {}, { bus: 'nats' }); });
  afterEach(() => t.close());

  it('stores a publish in the PUBSUB stream and dedupes a repeated idempotency key to the first message', async () => {
    const first = await t.engine.pubsub.publish(t.scope, { topic: 'orders.created', data: { id: 1 }, idempotencyKey: 'order-1' });
    expect(first).toMatchObject({ duplicate: false });
    expect(first.sequence).toBeGreaterThan(0);
    const again = await t.engine.pubsub.publish(t.scope, { topic: 'orders.created', data: { id: 1 }, idempotencyKey: 'order-1' });
    expect(again).toEqual({ eventId: first.eventId, sequence: first.sequence, duplicate: true });
    const other = await t.engine.pubsub.publish(t.scope, { topic: 'orders.created', data: [1, 2] });
    expect(other.sequence).toBeGreaterThan(first.sequence);
    expect(await countStreamMessages('PUBSUB', subjects.topic(t.scope.project, t.scope.env, 'orders.created'))).toBe(2);

    const topics = await t.engine.pubsub.listTopics(t.scope);
    expect(topics).toEqual([{ name: 'orders.created', messageCount: 2, consumerCount: 0, firstMessageAt: expect.any(String), lastMessageAt: expect.any(String) }]);
    expect(await t.engine.pubsub.listTopics({ ...t.scope, env: `${t.scope.env}x` })).toEqual([]);
  });

  it('delivers topic messages and run events to a subscription session, only for its scope and pattern', async () => {
    const received: WsServerMessage[] = [];
    const session = new SubscriptionSession(t.bus, t.scope, (m) => received.push(m));
    session.handle(JSON.stringify({ type: 'subscribe', subscription: { pattern: 'topic:orders.>' } }));
    session.handle(JSON.stringify({ type: 'subscribe', subscription: { pattern: 'system.run.run-42.*', options: { includeMetadata: true } } }));
    const ids = received.filter((m) => m.type === 'subscription_result').map((m) => (m as { results: { subscriptionId?: string }[] }).results[0].subscriptionId);
    expect(ids).toHaveLength(2);
    // Core NATS subscriptions on the connection the publishes use: NATS applies one connection's SUB before its later PUB.

    const published = await t.engine.pubsub.publish(t.scope, { topic: 'orders.eu.created', data: { id: 7 }, runId: 'run-1' });
    await t.engine.pubsub.publish({ ...t.scope, env: `${t.scope.env}x` }, { topic: 'orders.eu.created', data: { id: 8 } });
    await t.engine.pubsub.publish(t.scope, { topic: 'invoices.sent', data: {} });
    await t.bus.publish(subjects.runEvent(t.scope.env, 'run-42', 'completed'), { runId: 'run-42', status: 'completed' });

    // A last message on the subscribed pattern arrives behind anything published before it on
    // this connection, including what must not be delivered (the other env, the other topic).
    const barrier = await t.engine.pubsub.publish(t.scope, { topic: 'orders.zz.barrier', data: {} });
    await waitFor('the barrier message', () => received.some((m) => m.type === 'event' && m.eventId === barrier.eventId) || undefined);
    const events = received.filter((m) => m.type === 'event' && m.eventId !== barrier.eventId);
    expect(events).toEqual(expect.arrayContaining([
      { type: 'event', subscriptionId: ids[0], topic: 'orders.eu.created', data: { id: 7 }, eventId: published.eventId },
      { type: 'event', subscriptionId: ids[1], topic: 'system.run.run-42.completed', data: { runId: 'run-42', status: 'completed' }, meta: { timestamp: expect.any(String) } },
    ]));
    expect(events).toHaveLength(2);
    session.close();
    expect(session.size).toBe(0);
  });

  it('fails a publish the bus did not acknowledge with INTERNAL_ERROR and counts nothing', async () => {
    t.bus.failPublishes((s) => s.includes('.topic.'), 1);
    await expect(t.engine.pubsub.publish(t.scope, { topic: 'orders.created', data: {} })).rejects.toMatchObject({ code: 'INTERNAL_ERROR' });
    expect(await t.engine.pubsub.listTopics(t.scope)).toEqual([]);
    await expect(t.engine.pubsub.publish(t.scope, { topic: 'a b', data: {} })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    await expect(t.engine.pubsub.publish(t.scope, { topic: 'ok', data: {}, idempotencyKey: 'has space' })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});
