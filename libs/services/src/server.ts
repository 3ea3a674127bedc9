import 'reflect-metadata';
import { INestApplication, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { BusNamespace, NatsBus } from '@ironflow/bus';
import { NatsTriggerForwarder } from '@ironflow/engine';
import { ProcessLogger, createProcessLogger } from '@ironflow/observability';
import { OnePortServer, createPubSubServiceImpl, createRpcHandlers, listenOnePort } from '@ironflow/rpc';
import { PubSubService } from '@ironflow/contracts/proto';
import { attachSubscriptionGateway } from './api-gateway/subscription-gateway';
import { ApiGatewayModule } from './api-gateway/api-gateway.module';
import { AuditWriterModule } from './audit-writer/audit-writer.module';
import { NamespacedNatsServer } from './audit-writer/namespaced-nats.server';
import { CapacityScannerModule } from './capacity-scanner/capacity-scanner.module';
import { DispatcherModule } from './dispatcher/dispatcher.module';
import { failOversizedJobUpdate } from './dispatcher/oversized-job-update';
import { workerServiceHttp2Handler, workerServiceRoutes } from './dispatcher/stream/worker-service';
import { EngineErrorFilter } from './http/engine-error.filter';
import { authenticateHeaders, authenticateSubscription } from './http/api-key.guard';
import { serveConnectUnaryFirst } from './http/connect-unary-fast-path';
import { rawBodyMiddleware } from './http/raw-body.middleware';
import { observeHttp1Requests, observeHttp2Requests } from './http/request-metrics';
import { CoreModule } from './runtime/core.module';
import { EngineRuntime, pushSlotsFor } from './runtime/engine-runtime';
import { isGatewayAlone } from './runtime/gateway-alone';
import { NestPinoLogger } from './runtime/nest-logger';
import { IronflowSettings, SettingsError } from './runtime/settings';
import { SchedulerModule } from './scheduler/scheduler.module';
import { drainPlan } from './shutdown';

export const SERVICES = ['api-gateway', 'dispatcher', 'scheduler', 'capacity-scanner', 'audit-writer'] as const;
export type ServiceName = (typeof SERVICES)[number];

const SERVICE_MODULES: Record<ServiceName, Type<unknown>> = {
  'api-gateway': ApiGatewayModule,
  dispatcher: DispatcherModule,
  scheduler: SchedulerModule,
  'capacity-scanner': CapacityScannerModule,
  'audit-writer': AuditWriterModule,
};

export interface RunningServer {
  app: INestApplication;
  runtime: EngineRuntime;
  logger: ProcessLogger;
  /** The bound port (the real one when `settings.port` is 0). */
  port: number;
  url: string;
  /**
   * Drains and stops within `settings.shutdownTimeoutMs` (README "Shutdown"): `/ready` answers 503
   * at once; HTTP keeps being served while the engine drains (push calls, stream workers,
   * follow-ups) and sync calls in flight get their outcome or `UNAVAILABLE` naming their runs by
   * the drain deadline; then the listener closes, letting answers in flight finish, and the store
   * and bus close. Idempotent. The hard cap itself (exit whatever is left) is the process's:
   * see `exitOnSignals`.
   */
  close(): Promise<void>;
}

export interface StartServerOptions {
  /** The process logger; default JSON lines on stdout at `settings.logLevel`, service `ironflow`. */
  logger?: ProcessLogger;
  /** What the user set the port with, named in the error when it cannot be listened on; default `IRONFLOW_PORT` (`ironflow dev --port` passes `--port`). */
  portSource?: string;
}

/**
 * Starts a process serving `services` over one shared core (DESIGN.md "Deployables"): one Nest
 * app, one port for REST, Connect JSON (HTTP/1.1) and gRPC / Connect binary (h2c). `ironflow dev`
 * passes all five. Throws {@link SettingsError} naming the variable when the store or NATS cannot
 * be opened or the port is taken (naming `options.portSource`).
 */
export async function startServer(settings: IronflowSettings, services: readonly ServiceName[], options: StartServerOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createProcessLogger({ service: 'ironflow', level: settings.logLevel });
  const runtime = await EngineRuntime.open(settings, logger, { pushConcurrency: pushSlotsFor(settings, services) });
  let app: INestApplication | undefined;
  let listener: OnePortServer;
  let subscriptions: ReturnType<typeof attachSubscriptionGateway> | undefined;
  try {
    @Module({ imports: [CoreModule.forRoot(runtime), ...services.map((s) => SERVICE_MODULES[s])] })
    class RootModule {}

    app = await NestFactory.create(RootModule, { bodyParser: false, logger: new NestPinoLogger(logger), abortOnError: false });
    // A job update refused as too large still fails its attempt (dispatcher routes only).
    const onTooLarge = services.includes('dispatcher')
      ? (req: Parameters<typeof failOversizedJobUpdate>[1]) => failOversizedJobUpdate(runtime, req, settings.maxPayloadBytes)
      : undefined;
    app.use(rawBodyMiddleware(settings.maxPayloadBytes, onTooLarge));
    app.useGlobalFilters(new EngineErrorFilter(services));
    await app.init();
    if (services.includes('audit-writer') && settings.natsUrl) {
      // Subjects and queue group in the deployment's namespace: `ifx.{clusterId}.ironflow.*.*.audit.write`, `{clusterId}-audit-writer`.
      app.connectMicroservice({ strategy: new NamespacedNatsServer(new BusNamespace(settings.clusterId), { servers: settings.natsUrl.split(','), queue: 'audit-writer' }) });
      await app.startAllMicroservices();
    }
    // The dispatcher serves the worker stream (`WorkerService.Connect`) on the HTTP/2 side. Every
    // HTTP/2 call passes the API key check once, in the router's interceptor (HTTP/1: ApiKeyGuard).
    const authenticate = (headers: Headers) => authenticateHeaders(runtime.engine.apiKeys, headers);
    const streamOptions = { authenticate, logger: runtime.engine.resources.logger, maxBodyBytes: settings.maxPayloadBytes };
    const routes = services.includes('dispatcher') ? workerServiceRoutes(runtime.engine.streams, streamOptions) : undefined;
    const pubsub = createPubSubServiceImpl({ pubsub: runtime.engine.pubsub, api: runtime.engine.api });
    const http2Handler = services.includes('api-gateway')
      ? createRpcHandlers(runtime.engine.api, authenticate, { maxBodyBytes: settings.maxPayloadBytes, routes: (router) => { routes?.(router); router.service(PubSubService, pubsub); } }).http2Handler
      : routes
        ? workerServiceHttp2Handler(runtime.engine.streams, streamOptions)
        : (_req: unknown, res: { statusCode: number; end(): void }) => { res.statusCode = 404; res.end(); };
    // The api-gateway serves subscriptions (`<base>/ws`) on the HTTP/1.1 side.
    subscriptions = services.includes('api-gateway') ? attachSubscriptionGateway(app.getHttpServer(), { bus: runtime.engine.resources.bus, scopeOf: (req) => authenticateSubscription(runtime.engine.apiKeys, req) }) : undefined;
    // A gateway without a dispatcher in its process hands a dispatcher the sync triggers it does not
    // push itself (claim at trigger, issue 11: `IRONFLOW_GATEWAY_PUSH=false`, or its slots all taken; see `GatewayPush`).
    if (isGatewayAlone(services) && runtime.bus instanceof NatsBus) {
      runtime.engine.triggers.setForwarder(new NatsTriggerForwarder(runtime.bus, runtime.metrics, runtime.engine.resources.config.triggerForwardTimeoutMs));
    }
    // The Connect unary JSON route (TriggerSync…) ahead of Express and Nest, same answers (issue 11).
    if (services.includes('api-gateway')) {
      serveConnectUnaryFirst(app.getHttpServer(), { api: runtime.engine.api, apiKeys: runtime.engine.apiKeys, maxBodyBytes: settings.maxPayloadBytes });
    }
    observeHttp1Requests(app.getHttpServer(), runtime.metrics);
    listener = await listenOnePort({ port: settings.port, host: settings.host, http1: app.getHttpServer(), http2Handler: observeHttp2Requests(http2Handler, runtime.metrics) }).catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'EADDRINUSE' || err.code === 'EACCES'
        ? new SettingsError(
            `${options.portSource ?? 'IRONFLOW_PORT'}: cannot listen on ${settings.host}:${settings.port}: ${err.code === 'EADDRINUSE' ? 'the port is in use' : 'permission denied'}; ` +
              `stop what listens there or choose another port (${options.portSource ?? 'IRONFLOW_PORT'})`,
          )
        : err;
    });
  } catch (err) {
    await subscriptions?.close();
    if (app) await app.close();
    else await runtime.close();
    throw err;
  }
  const host = settings.host === '0.0.0.0' ? 'localhost' : settings.host;
  const nest = app;
  let closing: Promise<void> | undefined;
  return {
    app: nest,
    runtime,
    logger,
    port: listener.port,
    url: `http://${host}:${listener.port}`,
    close: () => (closing ??= (async () => {
      const plan = drainPlan(settings.shutdownTimeoutMs);
      runtime.draining = true;
      await Promise.all([runtime.engine.stop(plan.drainMs), runtime.engine.api.syncWaits.idle()]);
      await subscriptions?.close();
      await listener.close(plan.graceLeft());
      await nest.close();
    })()),
  };
}
