/**
 * Our SDK and a v0.29-style raw stream worker against a real server with API keys and a secrets
 * key (issue 9, items 4 and 7), on both stores: every transport sends `Authorization: Bearer`
 * and reads the secrets its function declares (push `secrets`, REST `context.secrets`, stream
 * `JobContext.secrets`); a worker without a key is refused and stops.
 */
import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { Server } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { createClient, createFunction, createWorker, listen, serve } from '@ironflow/sdk';
import { STORES, waitFor } from '@ironflow/testing';
import { RawStreamWorker, startStreamEngine, StreamEngine, uid } from './stream-kit.test';

const ADMIN_KEY = `admin-${randomBytes(24).toString('hex')}`;
const TOKEN = `tok-${randomBytes(8).toString('hex')}`;
const quietLogger = { warn: () => undefined, error: () => undefined };

describe.each(STORES)('API keys and secrets through our SDK on %s', (dialect) => {
  let engine: StreamEngine;
  let key: string;

  beforeAll(async () => {
    engine = await startStreamEngine(dialect, { adminKey: ADMIN_KEY, secretsKey: randomBytes(32) });
    const admin = createClient({ serverUrl: engine.url, apiKey: ADMIN_KEY });
    ({ key } = await admin.createApiKey({ project: 'acme', env: 'default', name: 'sdk' }));
    const client = createClient({ serverUrl: engine.url, apiKey: key });
    expect(await client.setSecret('TOKEN', TOKEN)).toMatchObject({ name: 'TOKEN' });
    expect((await client.listSecrets()).map((s) => s.name)).toEqual(['TOKEN']);
  });
  afterAll(async () => {
    await engine?.close();
  });

  it('the REST worker, the stream worker and serve() send the key and read their declared secrets with secrets.get()', async () => {
    const client = createClient({ serverUrl: engine.url, apiKey: key });
    const reader = (id: string, event: string, mode: 'push' | 'pull' = 'pull') =>
      createFunction({ id, mode, triggers: [{ event }], secrets: ['TOKEN'] }, async ({ secrets }) => ({ token: secrets.get('TOKEN'), other: secrets.get('OTHER') ?? null }));
    const restFn = reader(uid('rest-secret'), uid('rest.go'));
    const streamFn = reader(uid('stream-secret'), uid('stream.go'));
    const pushFn = reader(uid('push-secret'), uid('push.go'), 'push');

    const restWorker = createWorker({ serverUrl: engine.url, apiKey: key, functions: [restFn], logger: quietLogger });
    const streamWorker = createWorker({ transport: 'stream', serverUrl: engine.url, apiKey: key, functions: [streamFn], logger: quietLogger });
    const server: Server = await listen(0, serve({ functions: [pushFn] }));
    try {
      await restWorker.start();
      await streamWorker.start();
      await client.registerFunction(pushFn, { endpointUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/ironflow` });
      for (const fn of [restFn, streamFn, pushFn]) {
        const event = fn.config.triggers![0].event!;
        const result = await client.emitSync(event, {}, { timeoutMs: 20_000 });
        expect([fn.id, result.status, result.output]).toEqual([fn.id, 'completed', { token: TOKEN, other: null }]);
      }
      // The runs are in the key's project: an open-server call would not even be let in.
      await expect(createClient({ serverUrl: engine.url }).listRuns()).rejects.toMatchObject({ status: 401 });
      expect((await client.listRuns()).runs.length).toBeGreaterThanOrEqual(3);
    } finally {
      await restWorker.stop();
      await streamWorker.stop();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a v0.29-style stream worker gets the secrets in JobContext.secrets (field 3)', async () => {
    const client = createClient({ serverUrl: engine.url, apiKey: key });
    const fnId = uid('raw-secret');
    const event = uid('raw.go');
    await client.registerFunction({ id: fnId, mode: 'pull', triggers: [{ event }], secrets: ['TOKEN'] });
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${key}`);
    const raw = new RawStreamWorker(engine.port, metadata);
    try {
      const workerId = uid('worker-stream');
      raw.register(workerId, [fnId], 1);
      await raw.next('registered');
      await client.emit(event, {});
      const job = await raw.next('job');
      expect(job.functionId).toBe(fnId);
      expect(job.context?.secrets).toEqual({ TOKEN });
    } finally {
      raw.close();
    }
  });

  it('a worker without a key is refused and stops: the REST worker with 401, the stream worker with unauthenticated', async () => {
    const fn = createFunction({ id: uid('keyless') }, async () => 1);
    const restWorker = createWorker({ serverUrl: engine.url, apiKey: '', functions: [fn], logger: quietLogger });
    await expect(restWorker.start()).rejects.toMatchObject({ status: 401 });

    const streamWorker = createWorker({ transport: 'stream', serverUrl: engine.url, apiKey: '', functions: [fn], registerFunctions: false, logger: quietLogger });
    await expect(streamWorker.start()).rejects.toMatchObject({ status: 401, code: 'unauthenticated' });

    const raw = new RawStreamWorker(engine.port);
    try {
      raw.register(uid('worker-stream'), [], 1);
      const status = await waitFor('the stream to end', () => raw.status);
      expect(status.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(raw.received).toEqual([]);
    } finally {
      raw.close();
    }
  });
});
