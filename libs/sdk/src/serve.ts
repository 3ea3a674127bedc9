import { createServer, IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { executeInvocation } from './execute';
import { IronflowFunction, indexFunctions } from './function';
import { SIGNATURE_HEADER, verifyPushSignature } from './signature';
import { ENVIRONMENT_HEADER, resolveEnvironment } from './settings';
import { checkPushRequest } from './wire-validation';
import { refuseUnknownOptions } from './known-options';

/**
 * Options of {@link serve}.
 * - `functions`: the functions this endpoint runs (ids must be unique).
 * - `signingKey`: HMAC key for `X-Ironflow-Signature`; default env `IRONFLOW_SIGNING_KEY`. When no
 *   key is set (or `skipVerification` is true), requests are not verified.
 * - `env`: environment answered in `X-Ironflow-Environment`; default env `IRONFLOW_ENV`, else
 *   `"default"`.
 */
export interface ServeOptions {
  functions: readonly IronflowFunction<any, any>[];
  signingKey?: string;
  skipVerification?: boolean;
  env?: string;
}

/** The keys of {@link ServeOptions}: any other is refused (a misspelt `signingKey` would leave the signature unchecked). */
const SERVE_OPTION_KEYS: ReadonlySet<string> = new Set(['functions', 'signingKey', 'skipVerification', 'env'] satisfies (keyof ServeOptions)[]);

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * The push endpoint (WIRE-PROTOCOL.md 2): a Node `http.RequestListener` that runs one invocation
 * per request, whatever the method or path.
 *
 * Request: a JSON PushRequest (2.2), optionally signed with
 * `X-Ironflow-Signature: sha256=<hex HMAC-SHA256(signingKey, raw body)>`.
 * Answers (always `Content-Type: application/json` and `X-Ironflow-Environment: <env>`):
 * - 200 + PushResponse `{status: "completed"|"yielded"|"failed", steps, result?|yield?|error?}`
 *   (a yielded answer also carries `sent_at`, this endpoint's clock as it answers: the engine
 *   places a sleep on its own clock with it);
 * - 401 `SIGNATURE_MISSING` / `SIGNATURE_INVALID` (checked first, on the raw bytes);
 * - 400 `INVALID_JSON` / `VALIDATION_ERROR` (message lists the offending paths);
 * - 404 `FUNCTION_NOT_FOUND`;
 * - 500 `INTERNAL_ERROR` for an unexpected failure of the wrapper.
 * Error bodies are `{"error": {"message", "code"}}`.
 *
 * Throws `IronflowError` (`VALIDATION_ERROR`) at once when two functions share an id, or for an
 * option `ServeOptions` does not have.
 * Use with {@link listen}, `http.createServer(serve({...}))` (then raise the server's
 * `keepAliveTimeout` above your push client's idle timeout, as `listen` does: see
 * {@link SERVE_KEEP_ALIVE_MS}), or mount on any framework that hands over Node's raw
 * request/response (the body must not have been consumed).
 */
export function serve(options: ServeOptions): RequestListener {
  refuseUnknownOptions('serve', options, SERVE_OPTION_KEYS);
  const functions = indexFunctions(options.functions);
  const configuredKey = options.signingKey ?? process.env.IRONFLOW_SIGNING_KEY;
  const signingKey = options.skipVerification || configuredKey === '' ? undefined : configuredKey;
  const env = resolveEnvironment(options.env);

  const send = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'Content-Type': 'application/json',
      [ENVIRONMENT_HEADER]: env,
      'Content-Length': Buffer.byteLength(text),
    });
    res.end(text);
  };

  const handle = async (req: IncomingMessage): Promise<{ status: number; body: unknown }> => {
    const raw = await readBody(req);
    if (signingKey !== undefined) {
      const header = req.headers[SIGNATURE_HEADER];
      const check = verifyPushSignature(signingKey, raw, Array.isArray(header) ? header[0] : header);
      if (check === 'missing') throw new HttpError(401, 'SIGNATURE_MISSING', 'X-Ironflow-Signature header is required');
      if (check === 'invalid') throw new HttpError(401, 'SIGNATURE_INVALID', 'X-Ironflow-Signature does not match the body');
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new HttpError(400, 'INVALID_JSON', 'request body is not valid JSON');
    }
    const checked = checkPushRequest(parsed);
    if (!checked.ok) throw new HttpError(400, 'VALIDATION_ERROR', `invalid push request: ${checked.problems.join('; ')}`);
    const request = checked.value;
    const fn = functions.get(request.function_id);
    if (!fn) throw new HttpError(404, 'FUNCTION_NOT_FOUND', `function "${request.function_id}" is not served here`);
    const outcome = await executeInvocation({
      fn,
      runId: request.run_id,
      attempt: request.attempt,
      event: request.event,
      memo: request.steps,
      resume: request.resume,
      secrets: request.secrets,
      transport: 'push',
    });
    // A yield carries the answer's send time: the engine places a sleep's `until` on its own clock with it.
    return { status: 200, body: outcome.status === 'yielded' ? { ...outcome, sent_at: new Date().toISOString() } : outcome };
  };

  return (req, res) => {
    handle(req)
      .then(({ status, body }) => send(res, status, body))
      .catch((err: unknown) => {
        if (res.headersSent) {
          res.destroy();
          return;
        }
        if (err instanceof HttpError) send(res, err.status, { error: { message: err.message, code: err.code } });
        else send(res, 500, { error: { message: err instanceof Error ? err.message : String(err), code: 'INTERNAL_ERROR' } });
      });
  };
}

/** How long {@link listen}'s server keeps an idle keep-alive connection open, in ms. */
export const SERVE_KEEP_ALIVE_MS = 65_000;

/**
 * Starts an HTTP server for `listener` on `port` (0 picks a free port) and resolves once it
 * listens; read the port from `server.address()`. Rejects with the listen error (e.g.
 * `EADDRINUSE`). Close it with `server.close()`.
 *
 * An idle keep-alive connection stays open {@link SERVE_KEEP_ALIVE_MS} (65 s), longer than the
 * engine's push client (undici) or a load balancer keeps one idle: the client always closes first.
 * With Node's default of 5 s, a client whose idle timer had not fired yet (a stalled event loop is
 * enough) could send a push on a socket the server was closing and get `ECONNRESET`, which costs the
 * run an attempt.
 */
export function listen(port: number, listener: RequestListener): Promise<Server> {
  const server = createServer(listener);
  server.keepAliveTimeout = SERVE_KEEP_ALIVE_MS;
  server.headersTimeout = SERVE_KEEP_ALIVE_MS + 1_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
