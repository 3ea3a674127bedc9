import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { functionOptionsHelp } from '@ironflow/engine';
import { SERVICES, loadSettings, startServer } from '@ironflow/services';

/**
 * `ironflow dev`: every service in one process on SQLite (`.ironflow/dev.db` by default) with the
 * in-process bus, on port 9123. Ctrl-C drains and stops. Its help lists every function
 * registration option with its semantics (`FUNCTION_OPTIONS`).
 */
export function devCommand(): Command {
  return new Command('dev')
    .description('run every Ironflow service in this process on SQLite')
    .option('--port <port>', 'port for REST, Connect and gRPC', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('a port number');
      return n;
    })
    .option('--db <path>', 'SQLite file', '.ironflow/dev.db')
    .addHelpText('after', `\n${functionOptionsHelp()}`)
    .action(async (o: { port?: number; db: string }) => {
      const settings = loadSettings(process.env, {
        databaseUrl: process.env.IRONFLOW_DATABASE_URL ?? `sqlite:${resolve(o.db)}`,
        exclusiveStore: true,
        ...(o.port !== undefined ? { port: o.port } : {}),
        ...(process.env.IRONFLOW_DISPATCH_POLL_MS ? {} : { dispatchPollMs: 200 }),
        ...(process.env.IRONFLOW_TICK_MS ? {} : { tickMs: 250 }),
        ...(process.env.IRONFLOW_SCAN_MS ? {} : { scanMs: 250 }),
      });
      const started = Date.now();
      const server = await startServer(settings, SERVICES, ['warn', 'error']);
      console.log(`Ironflow dev server ready at ${server.url} in ${Date.now() - started} ms (store ${settings.databaseUrl})`);
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        console.log('stopping…');
        server.close().then(() => process.exit(0), () => process.exit(1));
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
}
