import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { Logger } from '@nestjs/common';
import { isEngineError, type ClientApi } from '@ironflow/contracts';
import type { ApiKeySystem } from '@ironflow/engine';
import { handleUnaryJson, IRONFLOW_SERVICE_PATH_PREFIX, unaryJsonError, type UnaryJsonResult } from '@ironflow/rpc';
import { authenticateRequest } from './api-key.guard';

export interface ConnectUnaryFastPathOptions {
  api: ClientApi;
  apiKeys: ApiKeySystem;
  /** `IRONFLOW_MAX_PAYLOAD_BYTES`: a longer body is left to Express (429 `resource_exhausted` / `PAYLOAD_TOO_LARGE` there). */
  maxBodyBytes: number;
}

/** `/ironflow.v1.IronflowService/<Method>` exactly as the SDK sends it (no query, no trailing slash, no escapes). */
const METHOD_NAME = /^[A-Za-z]+$/;

/**
 * The Connect unary JSON route of the api-gateway (`POST /ironflow.v1.IronflowService/<Method>`,
 * what `ClientRpcController` serves: TriggerSync, Trigger, GetRun…) answered straight from the
 * HTTP server's `request` event, ahead of Express and Nest, which cost more CPU per call than the
 * call's own parsing and rendering (issue 11). Same steps and answers as that route: the API key
 * check of `ApiKeyGuard` (a refusal in the Connect error shape, as `EngineErrorFilter` answers it;
 * an unexpected failure logged and answered `500 {"code":"INTERNAL_ERROR"}`), the raw body, then
 * `handleUnaryJson`; the answer with the headers `res.json` sends (less its ETag).
 *
 * Only the plain case takes this path: `POST`, that exact path, a `Content-Length` within
 * `maxBodyBytes`, no `Content-Encoding` or `Transfer-Encoding`. Every other request (a compressed
 * or chunked body, an oversized one, another spelling of the path, any other route) goes to the
 * listeners the server had before, unchanged.
 */
export function serveConnectUnaryFirst(server: Server, options: ConnectUnaryFastPathOptions): void {
  const others = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  const logger = new Logger('http');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const method = fastPathMethod(req, options.maxBodyBytes);
    if (method === undefined) {
      for (const listener of others) listener.call(server, req, res);
      return;
    }
    answer(req, method, options, logger).then(
      (result) => send(res, result),
      () => res.destroy(), // the request broke off while its body was read: nobody waits for an answer
    );
  });
}

/** The RPC name when `req` takes the fast path, else undefined. */
function fastPathMethod(req: IncomingMessage, maxBodyBytes: number): string | undefined {
  if (req.method !== 'POST' || !req.url?.startsWith(IRONFLOW_SERVICE_PATH_PREFIX)) return undefined;
  const method = req.url.slice(IRONFLOW_SERVICE_PATH_PREFIX.length);
  if (!METHOD_NAME.test(method)) return undefined;
  const { headers } = req;
  if (headers['content-encoding'] !== undefined || headers['transfer-encoding'] !== undefined) return undefined;
  const length = Number(headers['content-length']);
  if (headers['content-length'] === undefined || !Number.isInteger(length) || length < 0 || length > maxBodyBytes) return undefined;
  return method;
}

async function answer(req: IncomingMessage, method: string, options: ConnectUnaryFastPathOptions, logger: Logger): Promise<UnaryJsonResult> {
  const body = await readBody(req);
  let scope;
  try {
    scope = await authenticateRequest(options.apiKeys, req);
  } catch (err) {
    if (isEngineError(err)) return unaryJsonError(err);
    if (err instanceof Error) logger.error(err.message, err.stack);
    else logger.error(String(err));
    return { status: 500, body: { code: 'INTERNAL_ERROR', message: 'internal error' } };
  }
  try {
    return await handleUnaryJson(options.api, scope, method, body, { maxBodyBytes: options.maxBodyBytes });
  } catch (err) {
    return unaryJsonError(err);
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('aborted', () => reject(new Error('request aborted')));
  });
}

function send(res: ServerResponse, result: UnaryJsonResult): void {
  const json = JSON.stringify(result.body);
  res.writeHead(result.status, { 'x-powered-by': 'Express', 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}
