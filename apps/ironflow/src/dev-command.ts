import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { functionOptionsHelp } from '@ironflow/engine';
import { createProcessLogger } from '@ironflow/observability';
import { SERVICES, exitOnSignals, loadSettings, startServer } from '@ironflow/services';
import { printRunOutcomes } from './run-activity';

/**
 * `ironflow dev`: every service in one process on SQLite (`.ironflow/dev.db` by default) with the
 * in-process bus, on port 9123; `IRONFLOW_DATABASE_URL` and `NATS_URL` switch it to PostgreSQL
 * and NATS. Prints the URL, then one line per run outcome (stdout); engine warnings and errors go
 * to stderr as JSON lines (coloured text on a terminal). Ctrl-C drains and stops. Its help lists
 * every function registration option with its semantics (`FUNCTION_OPTIONS`).
 */
export function devCommand(): Command {
  return new Command('dev')
    .description('run every Ironflow service in this process on SQLite, with the runs UI at http://localhost:<port>/')
    .option('--port <port>', 'port for REST, Connect, gRPC and the UI', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('a port number');
      return n;
    })
    .option('--db <path>', 'SQLite file (ignored when IRONFLOW_DATABASE_URL is set)', '.ironflow/dev.db')
    .addHelpText(
      'after',
      [
        '',
        'Store and bus: SQLite and an in-process bus by default. To run on PostgreSQL and NATS instead, set',
        '  IRONFLOW_DATABASE_URL=postgres://user@host:5432/db   (the store; --db is then ignored)',
        '  NATS_URL=nats://host:4222                            (the bus, NATS JetStream)',
        'Other settings: IRONFLOW_LOG_LEVEL (default warn here), IRONFLOW_SHUTDOWN_TIMEOUT_MS (default 30000).',
        '',
        functionOptionsHelp(),
      ].join('\n'),
    )
    .action(async (o: { port?: number; db: string }) => {
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
      const started = Date.now();
      const server = await startServer(settings, SERVICES, { logger });
      console.log(`Ironflow dev server ready at ${server.url} in ${Date.now() - started} ms (store ${settings.databaseUrl}); runs UI at ${server.url}/`);
      printRunOutcomes(server.runtime.bus, server.runtime.engine.api, (line) => console.log(line));
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => console.log('stopping…'));
      exitOnSignals(server, logger);
    });
}
