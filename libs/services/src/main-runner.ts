import { createProcessLogger } from '@ironflow/observability';
import { IronflowSettings, loadSettings, SettingsError } from './runtime/settings';
import { RunningServer, ServiceName, startServer } from './server';
import { isGatewayAlone } from './runtime/gateway-alone';
import { exitOnSignals } from './shutdown';

/**
 * The `main` of a service process: reads and validates settings from the environment, starts
 * `services`, logs the URL (JSON lines on stdout, service `name`), and on SIGTERM/SIGINT drains
 * and exits within the shutdown cap (`exitOnSignals`). A start failure exits 1 after one log line:
 * for a {@link SettingsError} (bad value, unreachable store or NATS, port in use) the line names
 * the variable and carries no stack.
 */
export async function runServiceMain(name: string, services: readonly ServiceName[]): Promise<RunningServer | undefined> {
  let logger = createProcessLogger({ service: name });
  try {
    const settings = loadSettings();
    logger = logger.child({ node_id: settings.nodeId });
    logger.level = settings.logLevel;
    const server = await startServer(settings, services, { logger });
    logger.log(`${name} ready at ${server.url}`, { url: server.url, ...pushFields(settings, services) });
    exitOnSignals(server, logger);
    return server;
  } catch (err) {
    if (err instanceof SettingsError) logger.fatal(`${name} could not start: ${err.message}`);
    else logger.fatal(`${name} could not start: ${err instanceof Error ? err.message : String(err)}`, { stack: err instanceof Error ? err.stack : undefined });
    process.exitCode = 1;
    return undefined;
  }
}

/**
 * The ready line's fields about push calls, so the processes that call push endpoints can be
 * compared at a glance (a signing key given to the dispatchers only fails the gateway's push calls
 * 401): `gateway_push` (api-gateway: `IRONFLOW_GATEWAY_PUSH`) and, on a process that calls push
 * endpoints (a dispatcher, or an api-gateway with `gateway_push`), `push_signed` (it has an
 * `IRONFLOW_SIGNING_KEY`). None on the other services.
 */
export function pushFields(settings: Pick<IronflowSettings, 'gatewayPush' | 'signingKey'>, services: readonly ServiceName[]): { gateway_push?: boolean; push_signed?: boolean } {
  const gateway = isGatewayAlone(services);
  const pushes = services.includes('dispatcher') || (gateway && settings.gatewayPush);
  return { ...(gateway ? { gateway_push: settings.gatewayPush } : {}), ...(pushes ? { push_signed: Boolean(settings.signingKey) } : {}) };
}
