import type * as http from 'node:http';
import type * as http2 from 'node:http2';
import { IronflowService, PubSubService, WorkerService } from '@ironflow/contracts/proto';
import { EngineMetrics } from '@ironflow/observability';

/** `/ironflow.v1.IronflowService/Trigger`…: the RPC paths of every service, a bounded set of route labels. */
const RPC_PATHS = new Set([IronflowService, WorkerService, PubSubService].flatMap((service) => service.methods.map((m) => `/${service.typeName}/${m.name}`)));

/** A request as Express leaves it: the matched route's template, if any. */
interface RoutedRequest {
  url?: string;
  originalUrl?: string;
  method?: string;
  baseUrl?: string;
  route?: { path?: unknown };
}

/**
 * The `route` label of a request: its RPC path (`/ironflow.v1.IronflowService/GetRun`), else the
 * template of the route Express matched (`/api/v1/runs/:id`), else `unmatched` — never the raw
 * URL, so ids and probes cannot grow the label set.
 */
export function routeLabel(req: RoutedRequest): string {
  const path = (req.originalUrl ?? req.url ?? '').split('?')[0];
  if (RPC_PATHS.has(path)) return path;
  if (typeof req.route?.path === 'string') return `${req.baseUrl ?? ''}${req.route.path}`;
  return 'unmatched';
}

/**
 * Observes every request of the HTTP/1.1 server in `ironflow_http_request_duration_seconds`
 * (route, method, status), from its arrival to the end of its response (or the connection's close).
 * Listens to the server's `request` event, beside Express, which sets the route on the request.
 */
export function observeHttp1Requests(server: http.Server, metrics: EngineMetrics): void {
  server.on('request', (req: http.IncomingMessage & RoutedRequest, res: http.ServerResponse) => {
    const end = metrics.httpRequestDuration.startTimer();
    res.once('close', () => end({ route: routeLabel(req), method: req.method ?? 'UNKNOWN', status: String(res.statusCode) }));
  });
}

/**
 * The HTTP/2 side's handler, observed like {@link observeHttp1Requests} (a gRPC call answers HTTP
 * 200 whatever its grpc-status; a worker stream is observed when it ends).
 */
export function observeHttp2Requests(
  handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  metrics: EngineMetrics,
): (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void {
  return (req, res) => {
    const end = metrics.httpRequestDuration.startTimer();
    res.once('close', () => end({ route: routeLabel({ url: req.url }), method: req.method, status: String(res.statusCode) }));
    handler(req, res);
  };
}
