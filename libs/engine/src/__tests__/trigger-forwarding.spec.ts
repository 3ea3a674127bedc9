import { randomBytes } from 'node:crypto';
import { Server, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { BusNamespace, NatsBus, Subscription } from '@ironflow/bus';
import { CallScope, EngineError } from '@ironflow/contracts';
import { EngineMetrics, silentLogger } from '@ironflow/observability';
import { FaultyBus, FaultyStore, TestStore, dropNamespaceStreams, openTestStore, waitFor } from '@ironflow/testing';
import { Engine } from '../engine';
import { EngineConfig } from '../config';
import { NatsTriggerForwarder, TriggerRequester, answerForwardedTriggers } from '../nats-trigger-forwarder';

/**
 * Claim at trigger in a cluster (issue 11): an api-gateway (an engine that does not dispatch push)
 * hands a TriggerSync to a dispatcher over NATS (`trigger.sync`, queue group); the dispatcher runs
 * it with its own push slot, claiming the run in the trigger's unit of work. Two engines on one
 * PostgreSQL database and real NATS, in a deployment namespace of this suite's own (a dispatcher
 * of another suite must never take these requests). Faults are injected behind the real ports
 * (`FaultyStore`, the requester around `NatsBus.request`).
 */
describe('forwarded sync triggers (api-gateway → dispatcher) [postgres + NATS]', () => {
  const namespace = new BusNamespace(`tf${randomBytes(4).toString('hex')}`);
  const config: Partial<EngineConfig> = { leaseMs: 30_000, auditLingerMs: 0, dispatchPollMs: 50, triggerForwardTimeoutMs: 10_000 };
  let db: TestStore;
  let server: Server;
  let endpoint: string;
  let calls: number;
  /** Requests to `/api/signed` refused for want of a signature. */
  let unsigned: number;
  /** While set, the endpoint holds each call until it resolves. */
  let hold: Promise<void> | undefined;
  let gateway: { engine: Engine; store: FaultyStore; bus: NatsBus; frames: FaultyBus; metrics: EngineMetrics };
  let dispatcherMetrics: EngineMetrics;
  let dispatcher: { engine: Engine; store: FaultyStore; bus: NatsBus; answering: Subscription };
  let scope: CallScope;

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', async () => {
        if (req.method !== 'POST' || (req.url !== '/api/ironflow' && req.url !== '/api/signed')) return void res.writeHead(404).end();
        // As the SDK's serve() with a signing key: a request without a signature is refused.
        if (req.url === '/api/signed' && !req.headers['x-ironflow-signature']) {
          unsigned += 1;
          res.writeHead(401, { 'content-type': 'application/json' });
          return void res.end(JSON.stringify({ error: { code: 'SIGNATURE_MISSING', message: 'X-Ironflow-Signature header is required' } }));
        }
        calls += 1;
        await hold;
        const { event } = JSON.parse(body) as { event: { data: { n: number } } };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ status: 'completed', result: { n: event.data.n }, steps: [] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/ironflow`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await dropNamespaceStreams(namespace);
  });

  /**
   * A gateway (its forwarder asks through `requester`, default its bus; its engine's bus wrapped in
   * a `FaultyBus`; with `gateway.pushAtOnce` it calls its sync triggers' push runs itself) and a
   * dispatcher answering in the queue group.
   */
  async function openCluster(options: { requester?: (bus: NatsBus) => TriggerRequester; dispatcher?: Partial<EngineConfig>; gateway?: Partial<EngineConfig> & { pushAtOnce?: boolean } } = {}): Promise<void> {
    calls = 0;
    unsigned = 0;
    hold = undefined;
    db = await openTestStore('postgres');
    const suffix = randomBytes(4).toString('hex');
    scope = { project: `p${suffix}`, env: `e${suffix}` };
    const url = process.env.IRONFLOW_TEST_NATS_URL!;
    const gatewayBus = await NatsBus.connect({ url, namespace });
    const gatewayStore = new FaultyStore(db.store);
    const metrics = new EngineMetrics();
    const { pushAtOnce = false, ...gatewayConfig } = options.gateway ?? {};
    const frames = new FaultyBus(gatewayBus);
    const gatewayEngine = new Engine({ store: gatewayStore, clock: db.clock, bus: frames, metrics, config: { ...config, ...gatewayConfig } });
    gatewayEngine.triggers.setForwarder(new NatsTriggerForwarder(options.requester?.(gatewayBus) ?? gatewayBus, metrics, config.triggerForwardTimeoutMs!));
    if (pushAtOnce) gatewayEngine.start({ pushDispatch: false, pushAtOnce: true, scheduler: false });
    gateway = { engine: gatewayEngine, store: gatewayStore, bus: gatewayBus, frames, metrics };
    const opened = await db.reopen();
    const dispatcherBus = await NatsBus.connect({ url, namespace });
    const dispatcherStore = new FaultyStore(opened.store);
    dispatcherMetrics = new EngineMetrics();
    const dispatcherEngine = new Engine({ store: dispatcherStore, clock: opened.clock, bus: dispatcherBus, metrics: dispatcherMetrics, config: { ...config, ...options.dispatcher } });
    dispatcherEngine.start({ pushDispatch: true, scheduler: false });
    dispatcher = { engine: dispatcherEngine, store: dispatcherStore, bus: dispatcherBus, answering: answerForwardedTriggers(dispatcherBus, dispatcherEngine.triggers, silentLogger) };
    await gatewayEngine.api.registerFunction(scope, { id: 'pushed', mode: 'push', endpointUrl: endpoint, triggers: [{ event: 'push.started' }] });
  }

  afterEach(async () => {
    for (const node of [gateway, dispatcher]) {
      await node?.engine.stop(1000);
      await node?.bus.close();
    }
    await db?.dispose();
  });

  async function rows(sql: string, params: unknown[]): Promise<number> {
    return db.store.read('count', async (tx) => Number((await tx.query<{ n: number | string }>(sql, params))[0].n));
  }
  const eventCount = () => rows(`SELECT COUNT(*) AS n FROM events WHERE project = $1 AND env = $2`, [scope.project, scope.env]);
  const runCount = () => rows(`SELECT COUNT(*) AS n FROM runs WHERE project = $1 AND env = $2`, [scope.project, scope.env]);
  const forwards = async (result: string) => (await gateway.metrics.triggerForwards.get()).values.find((v) => v.labels.result === result)?.value ?? 0;

  it('a dispatcher runs the gateway\'s TriggerSync: the event, its run and the run\'s claim in one unit of work, the push call at once', async () => {
    await openCluster();
    // Only the trigger's own claim can dispatch the run; the gateway never triggers itself.
    dispatcher.store.fail({ unit: (name) => name === 'claimSegments' });
    gateway.store.fail({ unit: (name) => name === 'trigger' });
    const { eventId, results } = await gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 1 }, timeoutMs: 20_000 });
    expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 1 } })]);
    expect(calls).toBe(1);
    expect(await eventCount()).toBe(1);
    expect(await rows(`SELECT COUNT(*) AS n FROM events WHERE id = $1`, [eventId])).toBe(1);
    expect(await forwards('answered')).toBe(1);
    expect(gateway.store.failures).toEqual([]);
  });

  it('an answer lost after the dispatcher committed: the gateway\'s own trigger finds that event and starts no second run', async () => {
    // The request reaches the dispatcher, which commits and answers; the answer never reaches the gateway.
    let lost = 0;
    await openCluster({
      requester: (bus) => ({
        request: async (subject, data, timeoutMs) => {
          await bus.request(subject, data, timeoutMs);
          lost += 1;
          throw Object.assign(new Error('TIMEOUT'), { code: 'TIMEOUT' });
        },
      }),
    });
    const { eventId, results } = await gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 2 }, timeoutMs: 20_000 });
    expect(lost).toBe(1);
    expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 2 } })]);
    expect(await eventCount()).toBe(1);
    expect(await runCount()).toBe(1);
    expect(await rows(`SELECT COUNT(*) AS n FROM runs WHERE event_id = $1`, [eventId])).toBe(1);
    expect(calls).toBe(1);
    expect(await forwards('failed')).toBe(1);
  });

  it('no dispatcher answers (NATS no responders): the gateway triggers itself and a dispatcher claims the run', async () => {
    await openCluster();
    // The dispatcher's connection closes (drained: the server has dropped its subscriptions); its loop still claims by polling.
    await dispatcher.bus.close();
    const { results } = await gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 3 }, timeoutMs: 20_000 });
    expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 3 } })]);
    expect(await forwards('no_responders')).toBe(1);
    expect(await eventCount()).toBe(1);
  });

  it('a dispatcher whose push slots are all taken holds the trigger until one frees, then claims it at trigger', async () => {
    await openCluster({ dispatcher: { pushConcurrency: 1, forwardedTriggerWaitMs: 20_000 } });
    // Neither the dispatcher's loop nor the gateway may start the second run: only the freed slot can.
    dispatcher.store.fail({ unit: (name) => name === 'claimSegments' });
    gateway.store.fail({ unit: (name) => name === 'trigger' });
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    const first = gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 6 }, timeoutMs: 20_000 });
    await waitFor('the first call to hold the only slot', () => calls === 1);
    const second = gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 7 }, timeoutMs: 20_000 });
    await waitFor('the second trigger to wait for the slot on the dispatcher', () => dispatcher.engine.push.waitingForSlot === 1);
    release();
    expect((await first).results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 6 } })]);
    expect((await second).results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 7 } })]);
    expect(calls).toBe(2);
    expect(await forwards('answered')).toBe(2);
    expect(gateway.store.failures).toEqual([]);
  });

  it('a dispatcher with no slot free within forwardedTriggerWaitMs answers busy: the gateway triggers itself, the run waits for the slot', async () => {
    await openCluster({ dispatcher: { pushConcurrency: 1, forwardedTriggerWaitMs: 0 } });
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    const first = gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 4 }, timeoutMs: 20_000 });
    await waitFor('the first call to hold the only slot', () => calls === 1);
    const second = gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 5 }, timeoutMs: 20_000 });
    await waitFor('the second trigger to be answered busy', async () => (await forwards('busy')) === 1);
    release();
    expect((await first).results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 4 } })]);
    expect((await second).results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 5 } })]);
    expect(await forwards('answered')).toBe(1);
    expect(await eventCount()).toBe(2);
    expect(await runCount()).toBe(2);
  });

  it('a dispatcher with 8 triggers per slot waiting already runs the next one at once, its run queued: the gateway never triggers itself', async () => {
    await openCluster({ dispatcher: { pushConcurrency: 1, forwardedTriggerWaitMs: 20_000 } });
    gateway.store.fail({ unit: (name) => name === 'trigger' });
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    const sync = (n: number) => gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n }, timeoutMs: 20_000 });
    const pending = [sync(0)];
    await waitFor('the first call to hold the only slot', () => calls === 1);
    for (let n = 1; n <= 8; n += 1) pending.push(sync(n));
    await waitFor('eight triggers to wait for the slot', () => dispatcher.engine.push.waitingForSlot === 8);
    pending.push(sync(9));
    await waitFor('the ninth trigger to be answered, its run queued', async () => (await forwards('answered')) === 2);
    expect(await rows(`SELECT COUNT(*) AS n FROM runs WHERE project = $1 AND env = $2 AND status = 'waiting_for_capacity'`, [scope.project, scope.env])).toBe(1);
    release();
    const results = await Promise.all(pending);
    expect(results.map((r) => r.results)).toEqual(Array.from({ length: 10 }, (_v, n) => [expect.objectContaining({ status: 'completed', output: { n } })]));
    expect(await forwards('answered')).toBe(10);
    expect(await forwards('busy')).toBe(0);
    expect(await runCount()).toBe(10);
    expect(gateway.store.failures).toEqual([]);
  });

  it('a dispatcher whose push dispatch stopped answers busy: the gateway triggers itself', async () => {
    await openCluster();
    await dispatcher.engine.push.stop(1000);
    const { eventId, results } = await gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 8 }, timeoutMs: 300 });
    expect(await forwards('busy')).toBe(1);
    expect(await forwards('answered')).toBe(0);
    expect(results).toEqual([expect.objectContaining({ status: 'waiting_for_capacity' })]);
    expect(await rows(`SELECT COUNT(*) AS n FROM runs WHERE event_id = $1`, [eventId])).toBe(1);
    expect(calls).toBe(0);
  });

  it('callers get the errors a gateway that triggers itself gives: VALIDATION_ERROR and PAYLOAD_TOO_LARGE before any forward, FUNCTION_DEBOUNCED from the dispatcher', async () => {
    await openCluster();
    await expect(gateway.engine.api.triggerSync(scope, { event: ' ', data: {} })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: 'event: a non-empty string is required' });
    const big = { blob: 'x'.repeat(gateway.engine.resources.config.maxPayloadBytes) };
    await expect(gateway.engine.api.triggerSync(scope, { event: 'push.started', data: big })).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    expect((await gateway.metrics.triggerForwards.get()).values.reduce((sum, v) => sum + v.value, 0)).toBe(0);

    await gateway.engine.api.registerFunction(scope, { id: 'search', mode: 'pull', triggers: [{ event: 'search.typed' }], debounce: { periodMs: 1000 } });
    const forwarded = await gateway.engine.api.triggerSync(scope, { event: 'search.typed', data: { q: 'x' }, timeoutMs: 100 }).catch((e: unknown) => e);
    const local = await dispatcher.engine.api.triggerSync(scope, { event: 'search.typed', data: { q: 'x' }, timeoutMs: 100 }).catch((e: unknown) => e);
    expect(forwarded).toBeInstanceOf(EngineError);
    expect(forwarded).toMatchObject({ code: 'FUNCTION_DEBOUNCED', message: (local as EngineError).message, details: (local as EngineError).details });
    expect(await forwards('answered')).toBe(1);
    expect(await eventCount()).toBe(0);
  });
  describe('a gateway that calls push itself (pushAtOnce: IRONFLOW_GATEWAY_PUSH)', () => {
    const pushSegments = async (metrics: EngineMetrics) => (await metrics.segmentsDispatched.get()).values.find((v) => v.labels.mode === 'push')?.value ?? 0;
    const allForwards = async () => (await gateway.metrics.triggerForwards.get()).values.reduce((sum, v) => sum + v.value, 0);

    it('runs its TriggerSync\'s push run itself: the event, the run and its claim in its own trigger unit, the endpoint called at once, no forward, no claim by anyone', async () => {
      await openCluster({ gateway: { pushAtOnce: true } });
      // No claim may start the run, the gateway's (it has no claim loop) or the dispatcher's.
      dispatcher.store.fail({ unit: (name) => name === 'claimSegments' });
      gateway.store.fail({ unit: (name) => name === 'claimSegments' });
      const { eventId, results } = await gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 21 }, timeoutMs: 20_000 });
      expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 21 } })]);
      expect(calls).toBe(1);
      expect(await rows(`SELECT COUNT(*) AS n FROM runs WHERE event_id = $1`, [eventId])).toBe(1);
      expect(await allForwards()).toBe(0);
      expect([await pushSegments(gateway.metrics), await pushSegments(dispatcherMetrics)]).toEqual([1, 0]);
      expect([gateway.store.failures, dispatcher.store.failures]).toEqual([[], []]);
      // The lease the claim wrote went with the outcome.
      expect(await rows(`SELECT COUNT(*) AS n FROM leases WHERE run_id IN (SELECT id FROM runs WHERE event_id = $1)`, [eventId])).toBe(0);
    });

    it('hears the outcome it committed in process: with every RESULTS publish failing and the store poll a minute away, the call still answers at once', async () => {
      // Without the frame delivered in process the call would wait for its 2-minute deadline, past this test's 30 s.
      await openCluster({ gateway: { pushAtOnce: true, syncPollMs: 60_000 } });
      gateway.frames.failPublishes((subject) => subject.includes('.results.'));
      const { results } = await gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 22 }, timeoutMs: 120_000 });
      expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 22 } })]);
      // The call answered first; the publish follows on the next turn, and fails.
      const framePublishes = () => gateway.frames.attempts.filter((a) => a.subject.includes('.results.'));
      await waitFor('the frame\'s publish to be attempted', () => framePublishes().length > 0);
      expect(framePublishes()).toEqual([expect.objectContaining({ failed: true })]);
    }, 30_000);

    it('with its push slots all taken, hands the next TriggerSync to a dispatcher, which runs it', async () => {
      await openCluster({ gateway: { pushAtOnce: true, pushConcurrency: 1 } });
      dispatcher.store.fail({ unit: (name) => name === 'claimSegments' });
      let release!: () => void;
      hold = new Promise<void>((resolve) => (release = resolve));
      const first = gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 23 }, timeoutMs: 20_000 });
      await waitFor('the first call to hold the gateway\'s only slot', () => calls === 1);
      const second = gateway.engine.api.triggerSync(scope, { event: 'push.started', data: { n: 24 }, timeoutMs: 20_000 });
      await waitFor('the dispatcher to call the second run', () => calls === 2);
      release();
      expect((await first).results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 23 } })]);
      expect((await second).results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 24 } })]);
      expect(await forwards('answered')).toBe(1);
      expect([await pushSegments(gateway.metrics), await pushSegments(dispatcherMetrics)]).toEqual([1, 1]);
      expect(dispatcher.store.failures).toEqual([]);
    });

    it('an endpoint refuses its signature (the key on the dispatchers only): the run goes back to the queue, its attempt unspent, a dispatcher calls it signed; the next TriggerSync goes to the dispatchers', async () => {
      await openCluster({ gateway: { pushAtOnce: true }, dispatcher: { signingKey: 'a-push-signing-key-of-32-characters' } });
      await gateway.engine.api.registerFunction(scope, { id: 'signed', mode: 'push', endpointUrl: endpoint.replace('/api/ironflow', '/api/signed'), triggers: [{ event: 'signed.started' }], retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 60_000 } });
      const first = await gateway.engine.api.triggerSync(scope, { event: 'signed.started', data: { n: 31 }, timeoutMs: 20_000 });
      expect(first.results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 31 } })]);
      expect(await rows(`SELECT COUNT(*) AS n FROM runs WHERE event_id = $1 AND attempt = 1 AND execution_seq = 2`, [first.eventId])).toBe(1);
      expect([unsigned, calls]).toEqual([1, 1]);
      const second = await gateway.engine.api.triggerSync(scope, { event: 'signed.started', data: { n: 32 }, timeoutMs: 20_000 });
      expect(second.results).toEqual([expect.objectContaining({ status: 'completed', output: { n: 32 } })]);
      expect([unsigned, calls]).toEqual([1, 2]);
      expect(await forwards('answered')).toBe(1);
      expect([await pushSegments(gateway.metrics), await pushSegments(dispatcherMetrics)]).toEqual([1, 2]);
    });

    it('leaves queued runs to the dispatchers: an async trigger\'s run is claimed by the dispatcher, never by the gateway', async () => {
      await openCluster({ gateway: { pushAtOnce: true } });
      gateway.store.fail({ unit: (name) => name === 'claimSegments' });
      const { runIds } = await gateway.engine.api.trigger(scope, { event: 'push.started', data: { n: 25 } });
      await waitFor('the dispatcher to complete the run', async () => (await rows(`SELECT COUNT(*) AS n FROM runs WHERE id = $1 AND status = 'completed'`, [runIds[0]])) === 1);
      expect([await pushSegments(gateway.metrics), await pushSegments(dispatcherMetrics)]).toEqual([0, 1]);
      expect(gateway.store.failures).toEqual([]);
    });
  });
});
