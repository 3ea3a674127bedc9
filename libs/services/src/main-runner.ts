import { Logger } from '@nestjs/common';
import { loadSettings } from './runtime/settings';
import { RunningServer, ServiceName, startServer } from './server';

/**
 * The `main` of a service process: reads and validates settings from the environment, starts
 * `services`, logs the URL, and on SIGTERM/SIGINT drains and exits 0. A start failure (bad
 * configuration, unreachable store, port taken) is logged and exits 1.
 */
export async function runServiceMain(name: string, services: readonly ServiceName[]): Promise<RunningServer | undefined> {
  const logger = new Logger(name);
  try {
    const server = await startServer(loadSettings(), services);
    logger.log(`${name} ready at ${server.url} (node ${server.runtime.settings.nodeId})`);
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.log(`${signal}: draining`);
      server.close().then(
        () => process.exit(0),
        (err: unknown) => { logger.error(`shutdown failed: ${String(err)}`); process.exit(1); },
      );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    return server;
  } catch (err) {
    logger.error(`${name} could not start: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
    return undefined;
  }
}
