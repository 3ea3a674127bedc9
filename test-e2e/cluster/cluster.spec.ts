import { createServer, Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { DataSource } from 'typeorm';
import { createClient, createFunction, createWorker, serve, Worker } from '@ironflow/sdk';
import { OutcomeWatch, dropNamespaceStreams, scratchDatabase, waitFor } from '@ironflow/testing';
import { BusNamespace } from '@ironflow/bus';
import { ServiceProcess, clusterEnv, freePort, startIngress } from '../support/service-processes';

/**
 * The cluster (issue "five services as separate processes"): api-gateway, two dispatchers,
 * scheduler, capacity-scanner and audit-writer as separate OS processes from the build output,
 * on one PostgreSQL and one NATS, pools of 8, short leases and ticks. A batch of parent/child
 * runs; one dispatcher is killed with SIGKILL mid-batch and restarted. Every run ends with
 * exactly one outcome and every parent is woken once, shown by the run and step rows themselves
 * (`OutcomeWatch`'s triggers on this cluster's database, not the best-effort audit rows), and no
 * lease row is left after the lease period.
 *
 * The cluster runs with API keys: the first key is made on the api-gateway with the admin key,
 * and every other service learns it from the database (clients and workers use it; a worker
 * without it is refused by the dispatchers).
 */
const LEASE_MS = 3000;
const quiet = { warn: () => undefined, error: () => undefined };
const PARENTS = 20;
const ADMIN_KEY = `admin-${randomBytes(24).toString('hex')}`;

describe('cluster of separate service processes on PostgreSQL and NATS', () => {
  let db: { url: string; drop(): Promise<void> };
  let clusterId: string | undefined;
  let services: ServiceProcess[] = [];
  let dispatcher1: ServiceProcess;
  let dispatcher2: ServiceProcess;
  let gateway: ServiceProcess;
  let pushServer: Server;
  const workers: Worker[] = [];
  const ingresses: { url: string; close(): Promise<void> }[] = [];
  const env = `e2e${randomBytes(4).toString('hex')}`;
  const childCalls = new Map<string, number>();
  let releaseChildren!: () => void;
  const childrenHeld = new Promise<void>((r) => (releaseChildren = r));
  let apiKey: string;
  let watch: OutcomeWatch;

  /** Segments of the parent each transport executed. */
  const executedBy = { rest: 0, stream: 0 };
  const parentFor = (transport: 'rest' | 'stream') =>
    createFunction({ id: 'e2e.parent', mode: 'pull', triggers: [{ event: 'e2e.go' }] }, async ({ event, step }) => {
      executedBy[transport] += 1;
      const n = (event.data as { n: number }).n;
      const prepared = await step.run('prepare', async () => ({ n }));
      const child = (await step.invoke('e2e.child', { n: prepared.n })) as { doubled: number };
      return { n, doubled: child.doubled };
    });
  const child = createFunction({ id: 'e2e.child', mode: 'push' }, async ({ event, step, run }) => {
    childCalls.set(run.id, (childCalls.get(run.id) ?? 0) + 1);
    const n = (event.data as { n: number }).n;
    return step.run('work', async () => {
      await childrenHeld; // every call stays in flight until the kill has cut dispatcher-1's
      return { doubled: n * 2 };
    });
  });

  beforeAll(async () => {
    db = await scratchDatabase('postgres', 'ironflow_e2e');
    const common = clusterEnv(db.url, LEASE_MS, { IRONFLOW_ADMIN_KEY: ADMIN_KEY });
    clusterId = common.IRONFLOW_CLUSTER_ID;
    const make = async (app: ServiceProcess['app'], node: string) => new ServiceProcess(app, await freePort(), { ...common, IRONFLOW_NODE_ID: node });
    gateway = await make('api-gateway', 'gw-1');
    dispatcher1 = await make('dispatcher', 'dispatcher-1');
    dispatcher2 = await make('dispatcher', 'dispatcher-2');
    services = [gateway, dispatcher1, dispatcher2, await make('scheduler', 'scheduler-1'), await make('capacity-scanner', 'scanner-1'), await make('audit-writer', 'audit-1')];
    await Promise.all(services.map((s) => s.start()));
    watch = await OutcomeWatch.install(db.url); // the services migrated the schema

    ({ key: apiKey } = await createClient({ serverUrl: gateway.url, apiKey: ADMIN_KEY }).createApiKey({ project: 'e2e', env, name: 'cluster' }));

    pushServer = createServer(serve({ functions: [child] }));
    await new Promise<void>((r) => pushServer.listen(0, '127.0.0.1', r));
    const client = createClient({ serverUrl: gateway.url, environment: env, apiKey });
    await client.registerFunction(child, { endpointUrl: `http://127.0.0.1:${(pushServer.address() as AddressInfo).port}/` });
    for (const d of [dispatcher1, dispatcher2]) {
      const ingress = await startIngress(gateway, d);
      ingresses.push(ingress);
      const w = createWorker({ serverUrl: ingress.url, environment: env, apiKey, functions: [parentFor('rest')], pollIntervalMs: 50, pollErrorDelayMs: 100, reconnectDelayMs: 100, heartbeatIntervalMs: 500, maxConcurrentJobs: 8, logger: quiet });
      await w.start();
      workers.push(w);
      // A stream worker on each dispatcher too (our SDK's transport over @grpc/grpc-js, h2c);
      // its functions are registered through the gateway, as the ingress would route R1.
      const s = createWorker({ transport: 'stream', serverUrl: d.url, environment: env, apiKey, functions: [parentFor('stream')], registerFunctions: false, reconnectDelayMs: 100, heartbeatIntervalMs: 500, maxConcurrentJobs: 4, logger: quiet });
      await s.start();
      workers.push(s);
    }
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) await w.stop();
    for (const i of ingresses) await i.close();
    await Promise.all(services.map((s) => s.stop()));
    await new Promise((r) => pushServer?.close(r));
    await db?.drop();
    if (clusterId) await dropNamespaceStreams(new BusNamespace(clusterId));
  }, 60_000);

  it('survives a dispatcher killed with SIGKILL mid-batch: one outcome per run, every parent woken once, no lease left', async () => {
    const client = createClient({ serverUrl: gateway.url, environment: env, apiKey });
    const runIds: string[] = [];
    for (let n = 1; n <= PARENTS; n += 1) runIds.push(...(await client.emit('e2e.go', { n })).runIds);
    expect(runIds).toHaveLength(PARENTS);

    // Mid-batch: child calls are held in flight until the kill, so once a call of dispatcher-1 (the
    // holder of its run's lease) has reached the push server, the kill cuts at least that call. (Its
    // dispatch counter alone is no proof: under load a scrape can answer before the call is written.)
    const ds = new DataSource({ type: 'postgres', url: db.url });
    await ds.initialize();
    try {
      const cut = await waitFor('a child call of dispatcher-1 in flight at the push server', async () => {
        const held: { run_id: string }[] = await ds.query(`SELECT l.run_id FROM leases l JOIN runs r ON r.id = l.run_id WHERE r.function_id = 'e2e.child' AND r.env = $1 AND l.holder = 'dispatcher-1'`, [env]);
        return held.map((l) => l.run_id).find((id) => childCalls.has(id));
      }, 30_000, 50);
      const dispatchedBy1 = await pushDispatches(dispatcher1);
      await dispatcher1.kill9();
      releaseChildren();
      await dispatcher1.restart();

      const finished = await waitFor('every parent completed', async () => {
        const runs = await Promise.all(runIds.map((id) => client.getRun(id)));
        return runs.every((r) => r.status === 'completed') ? runs : undefined;
      }, 60_000, 50);
      for (const run of finished) expect(run.output).toEqual({ n: (run.input as { n: number }).n, doubled: 2 * (run.input as { n: number }).n });

      const children = await ds.query(`SELECT id, parent_run_id, status, wake_pending, version FROM runs WHERE function_id = 'e2e.child' AND env = $1`, [env]);
      expect(children).toHaveLength(PARENTS);
      expect(new Set(children.map((c: { parent_run_id: string }) => c.parent_run_id))).toEqual(new Set(runIds));
      expect(children.every((c: { status: string; wake_pending: number }) => c.status === 'completed' && Number(c.wake_pending) === 0)).toBe(true);
      // Every child executed at least once (a kill may cut a call, so some twice).
      for (const c of children as { id: string }[]) expect(childCalls.get(c.id)).toBeGreaterThanOrEqual(1);
      expect([...childCalls.keys()].sort()).toEqual(children.map((c: { id: string }) => c.id).sort());
      // The call the kill cut ran again after its lease was recovered.
      expect(childCalls.get(cut)).toBe(2);
      const steps = await ds.query(`SELECT run_id, status, output FROM steps WHERE type = 'invoke' AND run_id = ANY($1)`, [runIds]);
      expect(steps).toHaveLength(PARENTS);
      expect(steps.every((s: { status: string }) => s.status === 'completed')).toBe(true);
      // Exactly one outcome per run, from the run rows: each of the 40 runs committed one terminal
      // status, no ended run was written again (status, output, error, ended_at or version), and
      // no invoke step was resolved twice; each run's version is the one its commit wrote.
      const seen = await watch.read();
      expect(seen).toEqual({ outcomesCommitted: 2 * PARENTS, outcomesReplaced: 0, replacedRunIds: [], parentsWokenTwice: 0, waitsResolvedTwice: 0 });
      const commits = await ds.query(`SELECT w.run_id, w.new_version, r.version FROM outcome_watch_runs w JOIN runs r ON r.id = w.run_id WHERE w.kind = 'committed'`);
      expect(new Set(commits.map((c: { run_id: string }) => c.run_id))).toEqual(new Set([...runIds, ...children.map((c: { id: string }) => c.id)]));
      expect(commits.filter((c: { new_version: number; version: number }) => c.new_version !== c.version)).toEqual([]);
      await waitFor('no lease left after the lease period', async () => Number((await ds.query(`SELECT COUNT(*)::int AS n FROM leases`))[0].n) === 0, LEASE_MS * 3);
      // Workers over REST and over the stream both executed parent segments.
      expect(executedBy.rest).toBeGreaterThan(0);
      expect(executedBy.stream).toBeGreaterThan(0);
      // Both dispatchers executed runs (dispatcher-1 before it was killed).
      expect(dispatchedBy1).toBeGreaterThan(0);
      expect(await pushDispatches(dispatcher2)).toBeGreaterThan(0);
    } finally {
      await ds.destroy();
    }
  }, 120_000);

  it('a worker without the key is refused by every dispatcher: REST with 401, the stream with unauthenticated; clients too', async () => {
    const fn = createFunction({ id: 'e2e.keyless', mode: 'pull' }, async () => 1);
    for (const ingress of ingresses) {
      const rest = createWorker({ serverUrl: ingress.url, environment: env, apiKey: '', functions: [fn], logger: quiet });
      await expect(rest.start()).rejects.toMatchObject({ status: 401 });
    }
    for (const d of [dispatcher1, dispatcher2]) {
      const stream = createWorker({ transport: 'stream', serverUrl: d.url, environment: env, apiKey: '', functions: [fn], registerFunctions: false, logger: quiet });
      await expect(stream.start()).rejects.toMatchObject({ status: 401, code: 'unauthenticated' });
      const wrong = createWorker({ transport: 'stream', serverUrl: d.url, environment: env, apiKey: `${apiKey}x`, functions: [fn], registerFunctions: false, logger: quiet });
      await expect(wrong.start()).rejects.toMatchObject({ status: 401 });
    }
    await expect(createClient({ serverUrl: gateway.url, environment: env }).listRuns()).rejects.toMatchObject({ status: 401, code: 'unauthenticated' });
    for (const s of services) expect((await fetch(`${s.url}/health`)).status).toBe(200);
  }, 60_000);

  it('a cancel on the api-gateway reaches a stream worker on a dispatcher at once (CancelJob), not at its next heartbeat', async () => {
    let started = false;
    let abortReason: unknown;
    const fn = createFunction({ id: 'e2e.cancel-me', mode: 'pull', triggers: [{ event: 'e2e.cancel-me' }] }, async ({ step, signal }) => {
      await step.run('hold', () => new Promise<void>((resolve) => {
        started = true;
        signal.addEventListener('abort', () => {
          abortReason = signal.reason ?? 'aborted';
          resolve();
        });
      }));
      return { held: true };
    });
    const client = createClient({ serverUrl: gateway.url, environment: env, apiKey });
    await client.registerFunction(fn);
    // Heartbeats 10 minutes apart: within the waits below only the pushed cancel can reach it.
    const s = createWorker({ transport: 'stream', serverUrl: dispatcher2.url, environment: env, apiKey, functions: [fn], registerFunctions: false, heartbeatIntervalMs: 600_000, logger: quiet });
    await s.start();
    workers.push(s);
    const [runId] = (await client.emit('e2e.cancel-me', {})).runIds;
    await waitFor('the stream worker running the step', () => started, 30_000);
    await client.cancelRun(runId, 'customer called');
    await waitFor('the handler aborted by the cancel pushed on its stream', () => abortReason !== undefined, 30_000);
    expect(await client.getRun(runId)).toMatchObject({ status: 'cancelled', error: { code: 'CANCELLED', message: 'customer called' } });
  }, 90_000);
});

/** Push segments a dispatcher process claimed since it started, from its own /metrics. */
async function pushDispatches(service: ServiceProcess): Promise<number> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('ironflow_segments_dispatched_total{mode="push"}'));
  return line ? Number(line.split(' ').pop()) : 0;
}

