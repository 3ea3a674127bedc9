/**
 * Our SDK (`libs/sdk`) against a real server (all five services) on SQLite and PostgreSQL, as a
 * user writes it: `client.emit(name, data, {version, metadata})` reaches the handler on push
 * (`serve`), REST pull and stream pull (issue 7 item 2); a server with `IRONFLOW_SIGNING_KEY` signs
 * every push request and `serve({signingKey})` with the same key runs it, while a different key
 * answers 401 and the run fails as a dispatch failure (item 3).
 */
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { createClient, createFunction, createWorker, IronflowEvent, serve, Worker } from '@ironflow/sdk';
import { functionsSql } from '@ironflow/store';
import { STORES, TestServer, startTestServer, waitFor } from '@ironflow/testing';
import { uid } from '../support/wire-harness';

const SIGNING_KEY = 'test-signing-key-0123456789';
const quiet = { warn: () => undefined, error: () => undefined };

async function listenOn(handler: ReturnType<typeof serve>): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/ironflow` };
}

describe.each(STORES)('our SDK against the engine [%s]', (dialect) => {
  let engine: TestServer;
  const servers: Server[] = [];
  const workers: Worker[] = [];

  beforeAll(async () => {
    engine = await startTestServer(dialect, 'ironflow_sdk', { signingKey: SIGNING_KEY });
  });
  afterAll(async () => {
    for (const w of workers) await w.stop();
    for (const s of servers) await new Promise((resolve) => s.close(resolve));
    await engine?.close();
  });

  /** A function that records the event its handler sees. */
  function recording(id: string, event: string, seen: IronflowEvent[], mode: 'push' | 'pull' = 'pull') {
    return createFunction({ id, mode, triggers: [{ event }], retry: { maxAttempts: 1 } }, async ({ event: e }) => {
      seen.push(e);
      return { version: e.version };
    });
  }

  it.each(['push', 'rest', 'stream'] as const)('an emitted event\'s version and metadata reach a %s handler', async (transport) => {
    const client = createClient({ serverUrl: engine.server.url });
    const event = uid('meta.event');
    const seen: IronflowEvent[] = [];
    const fn = recording(uid(`meta-${transport}`), event, seen, transport === 'push' ? 'push' : 'pull');
    if (transport === 'push') {
      const { server, url } = await listenOn(serve({ functions: [fn], signingKey: SIGNING_KEY }));
      servers.push(server);
      await client.registerFunction(fn, { endpointUrl: url });
    } else {
      const worker = createWorker({ transport, serverUrl: engine.server.url, functions: [fn], logger: quiet, ...(transport === 'rest' ? { pollIntervalMs: 50 } : {}) } as Parameters<typeof createWorker>[0]);
      workers.push(worker);
      await worker.start();
    }
    const { runIds: [runId] } = await client.emit(event, { n: 1 }, { version: 2, metadata: { src: 'x' } });
    const done = await waitForRun(client, runId);
    expect(done.status).toBe('completed');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ name: event, data: { n: 1 }, version: 2, metadata: { src: 'x' } });
  });

  it.each([[true, 'all'], [false, 'none'], [undefined, 'run_lifecycle']] as const)('createFunction({recording: %s}) registers through a worker with the recording profile %s', async (recording, profile) => {
    const event = uid('rec.event');
    const fn = createFunction({ id: uid('rec'), triggers: [{ event }], ...(recording === undefined ? {} : { recording }) }, async () => 1);
    const worker = createWorker({ transport: 'rest', serverUrl: engine.server.url, functions: [fn], logger: quiet, pollIntervalMs: 50 });
    workers.push(worker);
    await worker.start();
    const { resources } = engine.server.runtime.engine;
    const stored = await resources.store.read('test', (tx) => functionsSql.getRecordingProfile(tx, 'default', 'default', fn.id));
    expect(stored).toBe(profile);
  });

  it('a push endpoint whose signing key differs answers 401 SIGNATURE_INVALID: the run fails as a dispatch failure, not run', async () => {
    const client = createClient({ serverUrl: engine.server.url });
    const event = uid('signed.event');
    const seen: IronflowEvent[] = [];
    const fn = recording(uid('signed-wrong'), event, seen, 'push');
    const { server, url } = await listenOn(serve({ functions: [fn], signingKey: 'another-key-entirely-0000' }));
    servers.push(server);
    await client.registerFunction(fn, { endpointUrl: url });
    const { runIds: [runId] } = await client.emit(event, {});
    const run = await waitForRun(client, runId);
    expect(run).toMatchObject({ status: 'failed', error: { code: 'PUSH_DISPATCH_FAILED' } });
    expect(run.error?.message).toContain('401');
    expect(run.error?.message).toContain('SIGNATURE_INVALID');
    expect(seen).toEqual([]);
  });
});

function waitForRun(client: ReturnType<typeof createClient>, runId: string) {
  return waitFor(`run ${runId} to end`, async () => {
    const run = await client.getRun(runId);
    return ['completed', 'failed', 'cancelled'].includes(run.status) ? run : undefined;
  }, 20_000, 50);
}
