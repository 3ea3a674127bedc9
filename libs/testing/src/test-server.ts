import { createProcessLogger } from '@ironflow/observability';
import { IronflowSettings, RunningServer, SERVICES, loadSettings, startServer } from '@ironflow/services';
import { Dialect } from '@ironflow/store';
import { scratchDatabase } from './scratch-database';

export interface TestServer {
  server: RunningServer;
  databaseUrl: string;
  /** Stops the server, then drops its database (idempotent). */
  close(): Promise<void>;
}

/**
 * A real server with all five services on a scratch database of `dialect`, on a free port of
 * 127.0.0.1, with short intervals (dispatch poll and tick 50 ms) and a pool of 4; `settings`
 * overrides any of those (e.g. a `signingKey`, `secretsKey`, `adminKey`, a short `leaseMs`).
 */
export async function startTestServer(dialect: Dialect, prefix: string, settings: Partial<IronflowSettings> = {}): Promise<TestServer> {
  const db = await scratchDatabase(dialect, prefix);
  const server = await startServer(
    loadSettings({}, { databaseUrl: db.url, port: 0, host: '127.0.0.1', dispatchPollMs: 50, tickMs: 50, poolSize: 4, ...settings }),
    SERVICES,
    { logger: createProcessLogger({ service: 'test-server', level: 'error' }) },
  );
  let closed: Promise<void> | undefined;
  return { server, databaseUrl: db.url, close: () => (closed ??= server.close().finally(db.drop)) };
}
