import { createServer, Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { DataSource } from 'typeorm';
import { createClient, createFunction, serve } from '@ironflow/sdk';
import { dropNamespaceStreams, scratchDatabase, waitFor } from '@ironflow/testing';
import { BusNamespace } from '@ironflow/bus';
import { ServiceProcess, clusterEnv, freePort } from '../support/service-processes';

/**
 * Cron and debounce through the cluster (issue 9, items 1 and 2): api-gateway, dispatcher,
 * capacity-scanner, audit-writer and THREE schedulers as separate OS processes on one PostgreSQL
 * and one NATS. A `* * * * * *` schedule starts exactly one run per tick over 30 ticks, with no
 * gap, while one scheduler is killed with SIGKILL; a burst of debounced events starts one run per
 * key with the last event. Runs are counted from the store's rows.
 */
const TICKS = 30;

describe('cron and debounce through the cluster (three schedulers)', () => {
  let db: { url: string; drop(): Promise<void> };
  let clusterId: string | undefined;
  let services: ServiceProcess[] = [];
  let schedulers: ServiceProcess[] = [];
  let gateway: ServiceProcess;
  let pushServer: Server;
  let ds: DataSource;
  const env = `e2e${randomBytes(4).toString('hex')}`;

  const heartbeat = createFunction({ id: 'e2e.heartbeat', mode: 'push', triggers: [{ cron: '* * * * * *', event: 'e2e.tick' }] }, async ({ event }) => ({ saw: (event.data as { scheduledAt: string }).scheduledAt }));
  const search = createFunction({ id: 'e2e.search', mode: 'push', triggers: [{ event: 'e2e.typed' }], debounce: { periodMs: 3000, key: 'user' } }, async ({ event }) => ({ q: (event.data as { q: string }).q }));

  beforeAll(async () => {
    db = await scratchDatabase('postgres', 'ironflow_e2e');
    // A loaded CI machine can stall every process for seconds: a tick is "missed" (and collapses)
    // only past 30 s, so a stall shows up as late runs, never as a gap.
    const common = clusterEnv(db.url, 5000, { IRONFLOW_CRON_CATCH_UP_MS: '30000' });
    clusterId = common.IRONFLOW_CLUSTER_ID;
    const make = async (app: ServiceProcess['app'], node: string) => new ServiceProcess(app, await freePort(), { ...common, IRONFLOW_NODE_ID: node });
    gateway = await make('api-gateway', 'gw-1');
    schedulers = [await make('scheduler', 'scheduler-1'), await make('scheduler', 'scheduler-2'), await make('scheduler', 'scheduler-3')];
    services = [gateway, await make('dispatcher', 'dispatcher-1'), ...schedulers, await make('capacity-scanner', 'scanner-1'), await make('audit-writer', 'audit-1')];
    await Promise.all(services.map((s) => s.start()));
    pushServer = createServer(serve({ functions: [heartbeat, search] }));
    await new Promise<void>((r) => pushServer.listen(0, '127.0.0.1', r));
    ds = new DataSource({ type: 'postgres', url: db.url });
    await ds.initialize();
  }, 120_000);

  afterAll(async () => {
    await ds?.destroy();
    await Promise.all(services.map((s) => s.stop()));
    await new Promise((r) => pushServer?.close(r));
    await db?.drop();
    if (clusterId) await dropNamespaceStreams(new BusNamespace(clusterId));
  }, 60_000);

  const endpoint = () => `http://127.0.0.1:${(pushServer.address() as AddressInfo).port}/`;

  it(`a * * * * * * schedule starts exactly one run per tick over ${TICKS} ticks across three schedulers, one of them killed midway`, async () => {
    const client = createClient({ serverUrl: gateway.url, environment: env });
    await client.registerFunction(heartbeat, { endpointUrl: endpoint() });
    /** Runs per tick (ms), from the run rows and their events. */
    const runsPerTick = async (): Promise<Map<number, number>> => {
      const rows: { data: string }[] = await ds.query(
        `SELECT e.data FROM runs r JOIN events e ON e.id = r.event_id WHERE r.function_id = 'e2e.heartbeat' AND r.env = $1`,
        [env],
      );
      const counts = new Map<number, number>();
      for (const r of rows) {
        const tick = Date.parse((JSON.parse(r.data) as { scheduledAt: string }).scheduledAt);
        counts.set(tick, (counts.get(tick) ?? 0) + 1);
      }
      return counts;
    };
    await waitFor('ten ticks', async () => (await runsPerTick()).size >= 10, 30_000, 100);
    await schedulers[0].kill9();
    const counts = await waitFor(`${TICKS + 1} ticks`, async () => {
      const c = await runsPerTick();
      return c.size > TICKS ? c : undefined;
    }, 60_000, 200);

    const first = Math.min(...counts.keys());
    const window = Array.from({ length: TICKS }, (_v, i) => first + i * 1000);
    expect(window.map((tick) => counts.get(tick) ?? 0)).toEqual(Array(TICKS).fill(1)); // no gap, no duplicate
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    // The runs complete through the push endpoint, each having seen its own tick.
    const done: { output: string; data: string }[] = await waitFor('the first ticks completed', async () => {
      const rows: { output: string; data: string }[] = await ds.query(
        `SELECT r.output, e.data FROM runs r JOIN events e ON e.id = r.event_id WHERE r.function_id = 'e2e.heartbeat' AND r.env = $1 AND r.status = 'completed'`,
        [env],
      );
      return rows.length >= 10 ? rows : undefined;
    }, 30_000, 200);
    for (const row of done) expect(JSON.parse(row.output)).toEqual({ saw: (JSON.parse(row.data) as { scheduledAt: string }).scheduledAt });
  }, 150_000);

  it('a burst of debounced events starts one run per key, with the last event of each', async () => {
    const client = createClient({ serverUrl: gateway.url, environment: env });
    await client.registerFunction(search, { endpointUrl: endpoint() });
    for (const q of ['i', 'ir', 'iro', 'iron']) {
      expect((await client.emit('e2e.typed', { user: 'ada', q })).runIds).toEqual([]);
    }
    for (const q of ['f', 'fl']) await client.emit('e2e.typed', { user: 'bob', q });

    const runs = await waitFor('both keys ran and nothing is pending', async () => {
      const pending: { n: number }[] = await ds.query(`SELECT COUNT(*)::int AS n FROM debounces WHERE env = $1`, [env]);
      const rows: { input: string; status: string }[] = await ds.query(`SELECT input, status FROM runs WHERE function_id = 'e2e.search' AND env = $1`, [env]);
      return pending[0].n === 0 && rows.length >= 2 && rows.every((r) => r.status === 'completed') ? rows : undefined;
    }, 30_000, 100);
    // Every event was emitted before the windows closed and none is pending: no further run can come.
    expect(runs.map((r) => JSON.parse(r.input)).sort((a, b) => a.user.localeCompare(b.user))).toEqual([{ user: 'ada', q: 'iron' }, { user: 'bob', q: 'fl' }]);
    const events: { n: number }[] = await ds.query(`SELECT COUNT(*)::int AS n FROM events WHERE name = 'e2e.typed' AND env = $1`, [env]);
    expect(events[0].n).toBe(6);
  }, 60_000);
});
