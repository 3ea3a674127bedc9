import { randomBytes } from 'node:crypto';
import { ServiceProcess } from '@ironflow/testing';

export type { ServiceApp } from '@ironflow/testing';
export { ServiceProcess, devApp, freePort } from '@ironflow/testing';

/**
 * The environment every process of a test cluster shares (DESIGN.md "Testing": pools of 8, short
 * leases and ticks) on `databaseUrl` and the test NATS, in a NATS namespace of its own
 * (`IRONFLOW_CLUSTER_ID`; `dropNamespaceStreams` clears it); `extra` adds or overrides variables.
 */
export function clusterEnv(databaseUrl: string, leaseMs: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    IRONFLOW_DATABASE_URL: databaseUrl,
    NATS_URL: process.env.IRONFLOW_TEST_NATS_URL!,
    IRONFLOW_POOL_SIZE: '8',
    IRONFLOW_LEASE_MS: String(leaseMs),
    IRONFLOW_TICK_MS: '200',
    IRONFLOW_SCAN_MS: '200',
    IRONFLOW_DISPATCH_POLL_MS: '100',
    // A deployment namespace per suite: a gateway hands sync triggers to any dispatcher of its
    // namespace, so one on another suite's database must never answer (drop its streams after).
    IRONFLOW_CLUSTER_ID: `e2e-${randomBytes(4).toString('hex')}`,
    ...extra,
  };
}

/**
 * The cluster's ingress (DESIGN.md "One port, several protocols"): `/api/v1/workers/*` and
 * `/ironflow.v1.WorkerService/*` go to `dispatcher`, everything else to `gateway`. HTTP/1.1 only
 * (REST and Connect JSON), enough for REST workers and clients. Returns its URL and a closer.
 */
export async function startIngress(gateway: ServiceProcess, dispatcher: ServiceProcess): Promise<{ url: string; close(): Promise<void> }> {
  const http = await import('node:http');
  const server = http.createServer((req, res) => {
    const target = req.url?.startsWith('/api/v1/workers') || req.url?.startsWith('/ironflow.v1.WorkerService/') ? dispatcher : gateway;
    const upstream = http.request({ host: '127.0.0.1', port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', (err) => {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'BAD_GATEWAY', message: String(err) }));
    });
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
