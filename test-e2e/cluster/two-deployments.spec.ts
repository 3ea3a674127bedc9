import { createProcessLogger } from '@ironflow/observability';
import { createServer, Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { NatsConnection, StreamConfig, connect } from 'nats';
import { Client } from 'pg';
import { BusNamespace, STREAMS } from '@ironflow/bus';
import { createClient, createFunction, serve } from '@ironflow/sdk';
import { RunningServer, SERVICES, loadSettings, startServer } from '@ironflow/services';
import { ScratchDatabase, scratchDatabase, waitFor } from '@ironflow/testing';

/**
 * Issue 10 item 4, "one NATS, many deployments": two installations with different
 * `IRONFLOW_CLUSTER_ID`s on one NATS server, each with its own PostgreSQL database and all five
 * services, serving the same project and env (`default`/`default`), 200 runs each. Every audit
 * row lands in its own deployment's database (no audit-writer answers the other's requests), no
 * message of one deployment reaches the other's subjects or the un-namespaced ones, and neither
 * overwrites the other's stream settings.
 */
const RUNS = 200;
const natsUrl = () => process.env.IRONFLOW_TEST_NATS_URL!;

interface Deployment {
  namespace: BusNamespace;
  db: ScratchDatabase;
  server: RunningServer;
  push: Server;
  runIds: string[];
  /** Every message seen on `ifx.{clusterId}.>`: its subject and its raw payload. */
  traffic: { subject: string; body: string }[];
}

describe('two deployments on one NATS server (IRONFLOW_CLUSTER_ID)', () => {
  const deployments: Deployment[] = [];
  let spy: NatsConnection;
  /** Messages on the un-namespaced subjects of project and env `default` (none of ours may be there). */
  const unNamespaced: { subject: string; body: string }[] = [];

  const work = createFunction({ id: 'ns.work', mode: 'push', triggers: [{ event: 'ns.go' }] }, async ({ event, step }) =>
    step.run('double', async () => ({ doubled: 2 * (event.data as { n: number }).n })),
  );

  const streamConfig = async (name: string): Promise<StreamConfig> => (await (await spy.jetstreamManager()).streams.info(name)).config;

  async function deploy(clusterId: string): Promise<Deployment> {
    const db = await scratchDatabase('postgres', 'ironflow_ns');
    const settings = loadSettings(
      { IRONFLOW_CLUSTER_ID: clusterId },
      { databaseUrl: db.url, natsUrl: natsUrl(), port: 0, host: '127.0.0.1', dispatchPollMs: 100, tickMs: 100, scanMs: 200, poolSize: 6, nodeId: clusterId },
    );
    const server = await startServer(settings, SERVICES, { logger: createProcessLogger({ service: clusterId, level: 'error' }) });
    const push = createServer(serve({ functions: [work] }));
    await new Promise<void>((r) => push.listen(0, '127.0.0.1', r));
    await createClient({ serverUrl: server.url }).registerFunction(work, { endpointUrl: `http://127.0.0.1:${(push.address() as AddressInfo).port}/` });
    const namespace = new BusNamespace(clusterId);
    const d: Deployment = { namespace, db, server, push, runIds: [], traffic: [] };
    spy.subscribe(`ifx.${clusterId}.>`, { callback: (_e, m) => d.traffic.push({ subject: m.subject, body: new TextDecoder().decode(m.data) }) });
    return d;
  }

  beforeAll(async () => {
    spy = await connect({ servers: natsUrl() });
    for (const pattern of ['ironflow.default.default.>', 'public.default.>']) {
      spy.subscribe(pattern, { callback: (_e, m) => unNamespaced.push({ subject: m.subject, body: new TextDecoder().decode(m.data) }) });
    }
    const suffix = randomBytes(4).toString('hex');
    deployments.push(await deploy(`nsa${suffix}`));
    deployments.push(await deploy(`nsb${suffix}`));
  }, 60_000);

  afterAll(async () => {
    for (const d of deployments) {
      await d.server.close();
      await new Promise((r) => d.push.close(r));
      await d.db.drop();
    }
    const jsm = await spy.jetstreamManager();
    for (const d of deployments) for (const s of STREAMS) await jsm.streams.delete(d.namespace.stream(s.name!)).catch(() => undefined);
    await spy.close();
  }, 60_000);

  it('runs 200 runs in each: every audit row in its own database, no message crosses, no stream settings overwritten', async () => {
    const [a, b] = deployments;
    const resultsOfA = await streamConfig(a.namespace.stream('RESULTS'));

    const emitAll = async (d: Deployment) => {
      const client = createClient({ serverUrl: d.server.url });
      for (let n = 0; n < RUNS; n += 1) d.runIds.push(...(await client.emit('ns.go', { n })).runIds);
    };
    await Promise.all(deployments.map(emitAll));
    expect(deployments.map((d) => d.runIds.length)).toEqual([RUNS, RUNS]);

    for (const d of deployments) {
      const pg = new Client({ connectionString: d.db.url });
      await pg.connect();
      try {
        await waitFor(`${RUNS} runs completed in ${d.namespace.clusterId}`, async () => Number((await pg.query(`SELECT COUNT(*)::int AS n FROM runs WHERE status = 'completed'`)).rows[0].n) === RUNS, 90_000, 100);
        // Each run: run.created and run.status_changed, both in this deployment's database.
        await waitFor('audit rows', async () => Number((await pg.query(`SELECT COUNT(*)::int AS n FROM audit_events`)).rows[0].n) >= 2 * RUNS, 30_000, 100);
        const rows = (await pg.query(`SELECT run_id, event_type FROM audit_events ORDER BY id`)).rows as { run_id: string; event_type: string }[];
        expect(rows).toHaveLength(2 * RUNS);
        expect(new Set(rows.map((r) => r.run_id))).toEqual(new Set(d.runIds));
        for (const type of ['run.created', 'run.status_changed']) expect(rows.filter((r) => r.event_type === type)).toHaveLength(RUNS);
      } finally {
        await pg.end();
      }
      const failures = await d.server.runtime.metrics.auditWriteFailures.get();
      expect(failures.values.reduce((sum, v) => sum + v.value, 0)).toBe(0);
    }

    // On the wire: each deployment's traffic names only its own runs; nothing of ours is un-namespaced.
    for (const [mine, other] of [[a, b], [b, a]]) {
      expect(mine.traffic.length).toBeGreaterThan(0);
      const text = mine.traffic.map((m) => `${m.subject} ${m.body}`).join('\n');
      for (const id of other.runIds) expect(text.includes(id)).toBe(false);
      expect(mine.traffic.filter((m) => m.subject.includes('.audit.write')).length).toBeGreaterThan(0);
      expect(mine.traffic.every((m) => m.subject.startsWith(`ifx.${mine.namespace.clusterId}.`))).toBe(true);
    }
    const leaked = unNamespaced.map((m) => `${m.subject} ${m.body}`).join('\n');
    for (const id of [...a.runIds, ...b.runIds]) expect(leaked.includes(id)).toBe(false);

    // B started after A and ran as long: A's stream settings are as A made them.
    expect(await streamConfig(a.namespace.stream('RESULTS'))).toEqual(resultsOfA);
  }, 180_000);
});
