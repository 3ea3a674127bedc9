/**
 * A cluster started by hand (README "Running on PostgreSQL and NATS"): each process answers only
 * its own routes. A call that reaches the wrong service — a worker route on an api-gateway, a
 * client route on a dispatcher — is a 404 `NOT_FOUND` whose message names the service that serves
 * it and how to route it, instead of a bare "Cannot GET". Raw HTTP, one process per service.
 */
import { createProcessLogger } from '@ironflow/observability';
import { loadSettings, RunningServer, ServiceName, startServer } from '@ironflow/services';
import { scratchDatabase, ScratchDatabase } from '@ironflow/testing';
import { rest } from '../support/wire-harness';

describe('wire: a route on the wrong service', () => {
  let db: ScratchDatabase;
  const servers: RunningServer[] = [];

  const start = async (services: ServiceName[]): Promise<RunningServer> => {
    const server = await startServer(loadSettings({}, { databaseUrl: db.url, port: 0, host: '127.0.0.1', poolSize: 2 }), services, { logger: createProcessLogger({ service: 'test', level: 'error' }) });
    servers.push(server);
    return server;
  };

  beforeAll(async () => {
    db = await scratchDatabase('sqlite', 'ironflow_wrong_service');
  });
  afterAll(async () => {
    for (const server of servers) await server.close();
    await db.drop();
  });

  it('a worker route on the api-gateway and a client route on the dispatcher answer 404 NOT_FOUND naming the service that serves them', async () => {
    const gateway = await start(['api-gateway']);
    const poll = await rest(gateway.url, 'GET', '/api/v1/workers/w1/jobs?available=1');
    expect(poll.status).toBe(404);
    expect(poll.json.code).toBe('NOT_FOUND');
    expect(poll.json.message).toContain('/api/v1/workers/w1/jobs is a worker route, served by the dispatcher; this process runs api-gateway.');
    await gateway.close();

    const dispatcher = await start(['dispatcher']);
    const events = await rest(dispatcher.url, 'GET', '/api/v1/events');
    expect(events.status).toBe(404);
    expect(events.json).toMatchObject({ code: 'NOT_FOUND' });
    expect(events.json.message).toContain('/api/v1/events is a client route, served by the api-gateway; this process runs dispatcher.');
    const register = await rest(dispatcher.url, 'POST', '/ironflow.v1.IronflowService/RegisterFunction', { id: 'f' });
    expect(register.status).toBe(404);
    expect(register.json.message).toContain('served by the api-gateway');
    const unknown = await rest(dispatcher.url, 'GET', '/api/v1/workers/w1/nothing-here');
    expect(unknown.status).toBe(404);
    expect(unknown.json.message).not.toContain('served by');
  });
});
