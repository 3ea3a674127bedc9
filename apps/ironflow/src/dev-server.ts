import { resolve } from 'node:path';
import { createProcessLogger } from '@ironflow/observability';
import { SERVICES, exitOnSignals, loadSettings, redactDatabaseUrl, startServer } from '@ironflow/services';
import { printRunOutcomes } from './run-activity';

/**
 * What `ironflow dev` runs once its options are checked: every service in this process (SQLite at
 * `o.db`, or `IRONFLOW_DATABASE_URL` and `NATS_URL`), on `o.port` (else `IRONFLOW_PORT`, 9123),
 * with short dev intervals unless set; prints the URL, the security mode and one line per run
 * outcome; drains and exits on SIGINT/SIGTERM. Loaded by `devCommand` on demand, so the client
 * commands do not load the services. Throws `SettingsError` when the server cannot start.
 */
export async function runDevServer(o: { port?: number; db: string }): Promise<void> {
  const settings = loadSettings(process.env, {
    databaseUrl: process.env.IRONFLOW_DATABASE_URL ?? `sqlite:${resolve(o.db)}`,
    exclusiveStore: true,
    ...(o.port !== undefined ? { port: o.port } : {}),
    ...(process.env.IRONFLOW_DISPATCH_POLL_MS ? {} : { dispatchPollMs: 200 }),
    ...(process.env.IRONFLOW_TICK_MS ? {} : { tickMs: 250 }),
    ...(process.env.IRONFLOW_SCAN_MS ? {} : { scanMs: 250 }),
    ...(process.env.IRONFLOW_LOG_LEVEL ? {} : { logLevel: 'warn' as const }),
  });
  const logger = createProcessLogger({ service: 'ironflow-dev', level: settings.logLevel, destination: 'stderr' });
  // Its reader gone (`ironflow dev | head`, a `tee` stopped by the same Ctrl-C), stdout answers
  // writes with EPIPE: the lines are dropped, and the server goes on (or drains) instead of
  // crashing on an unhandled 'error' event.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') logger.warn('stdout write failed', { error: String(err) });
  });
  const started = Date.now();
  const server = await startServer(settings, SERVICES, { logger, ...(o.port !== undefined ? { portSource: '--port' } : {}) });
  console.log(`Ironflow dev server ready at ${server.url} in ${Date.now() - started} ms (store ${redactDatabaseUrl(settings.databaseUrl)}); runs UI at ${server.url}/`);
  const auth = await server.runtime.engine.apiKeys.mode();
  console.log(
    auth.required
      ? `API keys: required (${auth.reason === 'setting' ? 'IRONFLOW_REQUIRE_API_KEY' : 'keys exist'}); send Authorization: Bearer <key>`
      : 'API keys: none, so this server is OPEN: anyone who reaches it may call every route. `ironflow apikey create` makes the first key and closes it.',
  );
  console.log(server.runtime.engine.secrets.configured ? 'Secrets: on (IRONFLOW_SECRETS_KEY)' : 'Secrets: off (set IRONFLOW_SECRETS_KEY, 32 bytes hex or base64, to store them)');
  printRunOutcomes(server.runtime.bus, server.runtime.engine.api, (line) => console.log(line));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => console.log('stopping…'));
  exitOnSignals(server, logger);
}
