/**
 * The push endpoint allow-list (issue 9, item 7) on both stores: checked at registration, and
 * again on every connection at dispatch, since DNS (or the setting) can change after a function
 * was registered. A refused connection fails the attempt with PUSH_ENDPOINT_REFUSED, not
 * retryable, before a byte reaches the address.
 */
import { AddressInfo } from 'node:net';
import { Server, createServer } from 'node:http';
import { SCOPE, STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { readLeases, readRun } from './engine-kit.test';

describe.each(STORES)('push endpoint allow-list [%s]', (dialect) => {
  let t: TestEngine;
  let server: Server;
  let url: string;
  let requests: number;

  beforeEach(async () => {
    requests = 0;
    server = createServer((_req, res) => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'completed', result: {}, steps: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/ironflow`;
    t = await openTestEngine(dialect, { dispatchPollMs: 20 });
  });
  afterEach(async () => {
    await t.close();
    await new Promise((resolve) => server.close(resolve));
  });

  it('registration refuses link-local and metadata endpoints by default and keeps nothing; loopback is allowed', async () => {
    for (const endpointUrl of ['http://169.254.169.254/latest/meta-data/', 'http://metadata.google.internal/', 'http://[fd00:ec2::254]/']) {
      await expect(t.engine.api.registerFunction(SCOPE, { id: 'to-metadata', mode: 'push', endpointUrl })).rejects.toMatchObject({
        code: 'VALIDATION_ERROR',
        message: expect.stringContaining('endpointUrl'),
      });
    }
    expect(await t.engine.api.listFunctions(SCOPE)).toEqual([]);
    await t.engine.api.registerFunction(SCOPE, { id: 'local', mode: 'push', endpointUrl: url });
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).toEqual(['local']);
  });

  it('with an allow-list, registration refuses an endpoint outside it', async () => {
    const strict = await t.restart({ config: { pushAllowedHosts: ['10.0.0.0/8', '*.example.com'] } });
    await expect(strict.api.registerFunction(SCOPE, { id: 'outside', mode: 'push', endpointUrl: url })).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
      message: expect.stringContaining('127.0.0.1, which IRONFLOW_PUSH_ALLOWED_HOSTS does not allow'),
    });
  });

  it('a dispatcher whose allow-list refuses the endpoint fails the attempt with PUSH_ENDPOINT_REFUSED, not retryable, and sends nothing', async () => {
    await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: url, triggers: [{ event: 'go' }] });
    const dispatcher = await t.restart({ config: { pushAllowedHosts: ['10.0.0.0/8'], dispatchPollMs: 20 } });
    const { runIds } = await dispatcher.api.trigger(SCOPE, { event: 'go', data: {} });
    dispatcher.start({ pushDispatch: true, scheduler: false });
    const run = await waitFor('the run to fail', async () => {
      const r = await readRun(t, runIds[0]);
      return r.status === 'failed' ? r : undefined;
    });
    expect(run).toMatchObject({ attempt: 1, error: { code: 'PUSH_ENDPOINT_REFUSED', retryable: false } });
    expect(run.error?.message).toContain('127.0.0.1');
    expect(await readLeases(t, runIds[0])).toEqual([]);
    expect(requests).toBe(0);
  });
});
