/**
 * `@ironflow/rpc`: the RPC transport of the client API (WIRE-PROTOCOL.md section 5) and the one-
 * port listener. See README.md for how the pieces are mounted.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type * as http2 from 'node:http2';
import type { ConnectRouter } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { type CallScope, type ClientApi, DEFAULT_MAX_PAYLOAD_BYTES } from '@ironflow/contracts';
import { type Authenticate, authInterceptor, openAuthentication } from './call-auth';
import { createIronflowServiceImpl } from './client-service';
import { IronflowService } from '@ironflow/contracts/proto';
import { toFetchHeaders } from './scope';
import { handleUnaryJson, unaryJsonError, type UnaryJsonOptions, type UnaryJsonResult } from './unary-json';

export { createIronflowServiceImpl, type ClientServiceOptions } from './client-service';
export {
  handleUnaryJson,
  unaryJsonError,
  UNARY_JSON_METHODS,
  type UnaryJsonErrorBody,
  type UnaryJsonOptions,
  type UnaryJsonResult,
} from './unary-json';
export { createPubSubServiceImpl, handlePubSubUnaryJson, RUN_ID_HEADER, type PubSubDeps } from './pubsub-methods';
export { serveUnaryJson, type JsonBinding } from './unary-json';
export { listenOnePort, type OnePortOptions, type OnePortServer } from './one-port';
export { scopeFromHeaders, toFetchHeaders, ENVIRONMENT_HEADER } from './scope';
export { authInterceptor, callScope, openAuthentication, type Authenticate } from './call-auth';
export {
  connectCodeOf,
  connectCodeString,
  httpStatusOfConnectCode,
  toConnectError,
  IRONFLOW_ERROR_CODE_HEADER,
} from './errors';
export { toStruct, toTimestamp, runStatusToProto, runStatusFromProto } from './client-mapping';
export * as v1 from './proto';

/** URL prefix of the client RPCs: `POST /ironflow.v1.IronflowService/<Method>`. */
export const IRONFLOW_SERVICE_PATH_PREFIX = `/${IronflowService.typeName}/`;

export interface RpcHandlersOptions extends UnaryJsonOptions {
  /**
   * Registers further services on the HTTP/2 router, e.g. `ironflow.v1.WorkerService` once the
   * stream is implemented: `(router) => router.service(WorkerService, impl)`.
   */
  routes?: (router: ConnectRouter) => void;
}

export interface RpcHandlers {
  /**
   * For the HTTP/2 side of {@link listenOnePort}: ConnectRPC's Node adapter serving
   * IronflowService (plus `options.routes`) over Connect (binary and JSON, plain protojson),
   * gRPC and gRPC-Web; unknown paths → 404. Request bodies are capped at `maxBodyBytes`.
   */
  http2Handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;
  /**
   * For the HTTP/1.1 controller at `POST /ironflow.v1.IronflowService/:method`: the JSON
   * compatibility layer ({@link handleUnaryJson}) with the scope `authenticate` gives `headers`
   * (a refusal answers the Connect error). Answer with
   * `res.status(status).type('application/json').send(JSON.stringify(body))`.
   */
  handleUnaryJson(method: string, rawBody: Buffer, headers: Headers | IncomingHttpHeaders): Promise<UnaryJsonResult>;
}

/**
 * Builds both entry points of the client RPC transport over one `ClientApi`.
 *
 * `authenticate` checks every call once at the edge and gives its scope (an interceptor on the
 * HTTP/2 router, so `options.routes` services are covered too); default
 * {@link openAuthentication} (project `default`, env from `X-Ironflow-Environment` else
 * `default`). Options: `health` (Health answer, default "ok"), `onError` (errors that are not
 * engine errors), `maxBodyBytes` (default 4 MiB), `routes` (extra HTTP/2 services).
 */
export function createRpcHandlers(api: ClientApi, authenticate: Authenticate = openAuthentication, options: RpcHandlersOptions = {}): RpcHandlers {
  const impl = createIronflowServiceImpl(api, options);
  const http2Handler = connectNodeAdapter({
    routes: (router) => {
      router.service(IronflowService, impl);
      options.routes?.(router);
    },
    interceptors: [authInterceptor(authenticate)],
    readMaxBytes: options.maxBodyBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
    jsonOptions: { ignoreUnknownFields: true },
  });
  return {
    http2Handler,
    handleUnaryJson: async (method, rawBody, headers) => {
      let scope: CallScope;
      try {
        scope = await authenticate(toFetchHeaders(headers));
      } catch (err) {
        return unaryJsonError(err);
      }
      return handleUnaryJson(api, scope, method, rawBody, options);
    },
  };
}
