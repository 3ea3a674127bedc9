import { createServer, Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { BusNamespace } from '@ironflow/bus';
import { createClient, createFunction, serve } from '@ironflow/sdk';
import { dropNamespaceStreams, scratchDatabase, waitFor } from '@ironflow/testing';
import { ServiceProcess, clusterEnv, freePort } from '../support/service-processes';

/**
 * Claim at trigger through the cluster (issue 11): two api-gateways, a dispatcher and an
 * audit-writer as separate OS processes on one PostgreSQL and NATS. The first gateway calls the
 * push runs of its TriggerSyncs itself (`IRONFLOW_GATEWAY_PUSH`, default true): the run is created,
 * claimed and called there, and answered without a hop to the dispatcher. The second
 * (`IRONFLOW_GATEWAY_PUSH=false`) hands each TriggerSync to the dispatcher, which creates the run and
 * claims it in one unit of work. Counted on each process's own `/metrics`; callers get the errors
 * they always got; with no dispatcher up the first gateway still runs its sync push runs, the
 * second triggers itself and the run waits for a dispatcher.
 */
describe('claim at trigger through the cluster (gateway push, gateway → dispatcher)', () => {
  let db: { url: string; drop(): Promise<void> };
  let clusterId: string | undefined;
  let services: ServiceProcess[] = [];
  let gateway: ServiceProcess;
  let forwarding: ServiceProcess;
  let dispatcher: ServiceProcess;
  let pushServer: Server;
  const env = `e2e${randomBytes(4).toString('hex')}`;

  const echo = createFunction({ id: 'e2e.echo', mode: 'push', triggers: [{ event: 'e2e.echo' }] }, async ({ event, step }) => step.run('echo', async () => ({ n: (event.data as { n: number }).n })));
  const typed = createFunction({ id: 'e2e.typed', mode: 'push', triggers: [{ event: 'e2e.typed' }], debounce: { periodMs: 60_000 } }, async () => 1);

  beforeAll(async () => {
    db = await scratchDatabase('postgres', 'ironflow_e2e');
    const common = clusterEnv(db.url, 5000);
    clusterId = common.IRONFLOW_CLUSTER_ID;
    const make = async (app: ServiceProcess['app'], node: string, extra: Record<string, string> = {}) => new ServiceProcess(app, await freePort(), { ...common, IRONFLOW_NODE_ID: node, ...extra });
    gateway = await make('api-gateway', 'gw-1');
    forwarding = await make('api-gateway', 'gw-2', { IRONFLOW_GATEWAY_PUSH: 'false' });
    dispatcher = await make('dispatcher', 'dispatcher-1');
    services = [gateway, forwarding, dispatcher, await make('audit-writer', 'audit-1')];
    await Promise.all(services.map((s) => s.start()));
    pushServer = createServer(serve({ functions: [echo, typed] }));
    await new Promise<void>((r) => pushServer.listen(0, '127.0.0.1', r));
    const client = createClient({ serverUrl: gateway.url, environment: env });
    const endpointUrl = `http://127.0.0.1:${(pushServer.address() as AddressInfo).port}/`;
    await client.registerFunction(echo, { endpointUrl });
    await client.registerFunction(typed, { endpointUrl });
  }, 120_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => s.stop()));
    await new Promise((r) => pushServer?.close(r));
    await db?.drop();
    if (clusterId) await dropNamespaceStreams(new BusNamespace(clusterId));
  }, 60_000);

  it('a TriggerSync on a gateway with push is run by that gateway: the run is created and called there, no forward, answered completed', async () => {
    const client = createClient({ serverUrl: gateway.url, environment: env });
    const result = await client.emitSync('e2e.echo', { n: 6 }, { timeoutMs: 30_000 });
    expect(result).toMatchObject({ status: 'completed', output: { n: 6 } });
    expect(await metric(gateway, 'ironflow_runs_created_total{function_id="e2e.echo"}')).toBe(1);
    expect(await metric(gateway, 'ironflow_segments_dispatched_total{mode="push"}')).toBe(1);
    expect(await forwards(gateway)).toBe(0);
    expect(await metric(dispatcher, 'ironflow_runs_created_total{function_id="e2e.echo"}')).toBe(0);
    expect(await metric(dispatcher, 'ironflow_segments_dispatched_total{mode="push"}')).toBe(0);
  }, 60_000);

  it('a TriggerSync on a gateway with IRONFLOW_GATEWAY_PUSH=false is run by the dispatcher: the run is created there and answered completed', async () => {
    const client = createClient({ serverUrl: forwarding.url, environment: env });
    const result = await client.emitSync('e2e.echo', { n: 7 }, { timeoutMs: 30_000 });
    expect(result).toMatchObject({ status: 'completed', output: { n: 7 } });
    expect(await metric(forwarding, 'ironflow_trigger_forwards_total{result="answered"}')).toBe(1);
    expect(await metric(dispatcher, 'ironflow_runs_created_total{function_id="e2e.echo"}')).toBe(1);
    expect(await metric(forwarding, 'ironflow_runs_created_total{function_id="e2e.echo"}')).toBe(0);
    expect(await metric(forwarding, 'ironflow_segments_dispatched_total{mode="push"}')).toBe(0);
  }, 60_000);

  it('callers get the Connect errors they always got: invalid_argument before anything runs, failed_precondition (FUNCTION_DEBOUNCED) from either gateway', async () => {
    for (const target of [gateway, forwarding]) {
      const invalid = await triggerSync(target, { event: '', data: {} });
      expect(invalid.status).toBe(400);
      expect(invalid.body).toMatchObject({ code: 'invalid_argument', ironflowCode: 'VALIDATION_ERROR', message: 'event: a non-empty string is required' });
      const debounced = await triggerSync(target, { event: 'e2e.typed', data: {} });
      // As test-e2e/wire/client-rpc.spec.ts has it on a single node.
      expect(debounced.status).toBe(400);
      expect(debounced.body).toMatchObject({ code: 'failed_precondition', ironflowCode: 'FUNCTION_DEBOUNCED' });
      expect(String((debounced.body as { message: string }).message)).toContain('e2e.typed');
    }
    // The forwarding gateway's debounced trigger was the dispatcher's answer.
    expect(await metric(forwarding, 'ironflow_trigger_forwards_total{result="answered"}')).toBe(2);
    expect(await forwards(gateway)).toBe(0);
  }, 60_000);

  it('with no dispatcher up: the gateway with push still answers its TriggerSync; the forwarding one triggers itself (no responders) and its run waits for a dispatcher', async () => {
    await dispatcher.stop();
    const direct = await createClient({ serverUrl: gateway.url, environment: env }).emitSync('e2e.echo', { n: 8 }, { timeoutMs: 30_000 });
    expect(direct).toMatchObject({ status: 'completed', output: { n: 8 } });
    const client = createClient({ serverUrl: forwarding.url, environment: env });
    const waiting = await client.emitSync('e2e.echo', { n: 9 }, { timeoutMs: 200 });
    expect(waiting.status).toBe('waiting_for_capacity');
    expect(await metric(forwarding, 'ironflow_trigger_forwards_total{result="no_responders"}')).toBe(1);
    await dispatcher.restart();
    const run = await waitFor('the run to complete once a dispatcher is up', async () => {
      const r = await client.getRun(waiting.runId);
      return r.status === 'completed' ? r : undefined;
    }, 60_000, 100);
    expect(run.output).toEqual({ n: 9 });
  }, 120_000);

  /** A raw Connect unary TriggerSync (what the SDK sends) to `target` and its status and body. */
  async function triggerSync(target: ServiceProcess, body: unknown): Promise<{ status: number; body: unknown }> {
    const res = await fetch(`${target.url}/ironflow.v1.IronflowService/TriggerSync`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-ironflow-environment': env },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }
});

/** A counter's value (exact series line) from a service's own /metrics; 0 when absent. */
async function metric(service: ServiceProcess, series: string): Promise<number> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Forwarded TriggerSyncs a gateway counted, every result. */
async function forwards(service: ServiceProcess): Promise<number> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith('ironflow_trigger_forwards_total{')).reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}
