import type { Server } from 'node:http';
import { IronflowClient, listen, serve } from '@ironflow/sdk';
import { functions } from './functions';

/**
 * Serves the example's functions over the push protocol on `port` and registers them with the
 * engine as push functions whose endpoint is this server. Returns the HTTP server.
 */
export async function startPushServer(client: IronflowClient, port: number): Promise<Server> {
  const server = await listen(port, serve({ functions }));
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  for (const fn of functions) {
    await client.registerFunction({ ...fn.config, mode: 'push', endpointUrl: `http://127.0.0.1:${bound}/api/ironflow` });
  }
  return server;
}

if (require.main === module) {
  const { createClient } = require('@ironflow/sdk') as typeof import('@ironflow/sdk');
  const port = Number(process.env.PUSH_PORT ?? 3400);
  startPushServer(createClient(), port).then(
    () => console.log(`order-fulfilment push endpoint on http://127.0.0.1:${port}/api/ironflow, registered with ${process.env.IRONFLOW_SERVER_URL ?? 'http://localhost:9123'}`),
    (err: unknown) => { console.error(String(err)); process.exit(1); },
  );
}
