import { request as undiciRequest } from 'undici';
import { IronflowClientError, errorMessage } from './errors';

/** A raw HTTP answer: status and body text. */
export interface RawResponse {
  status: number;
  text: string;
}

/** One HTTP call (see {@link sendRaw}). */
export interface RawRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  headers: Record<string, string>;
  body?: unknown;
  /** Aborts the call (e.g. worker stop). */
  signal?: AbortSignal;
  /** Per-call deadline in ms; none when absent. */
  timeoutMs?: number;
}

/**
 * Sends one request and returns its status and body text. Never throws for an HTTP status;
 * rejects with the network error (e.g. `connect ECONNREFUSED`, its `code` set) on a network
 * failure, with an `AbortError`/`TimeoutError` DOMException when `signal` aborts or `timeoutMs`
 * passes. Uses undici's `request` on its global keep-alive dispatcher, not `fetch`: no WHATWG
 * Request, Response or stream objects per call, a fraction of `fetch`'s CPU (issue 11: the client
 * is on every TriggerSync's path). Unlike `fetch`, it follows no redirect: a 3xx is an answer like
 * any other status.
 */
export async function sendRaw(url: string, request: RawRequest): Promise<RawResponse> {
  const signals: AbortSignal[] = [];
  if (request.signal) signals.push(request.signal);
  if (request.timeoutMs !== undefined) signals.push(AbortSignal.timeout(request.timeoutMs));
  const response = await undiciRequest(url, {
    method: request.method,
    headers: request.headers,
    body: request.body === undefined ? undefined : JSON.stringify(request.body),
    signal: signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals),
  });
  return { status: response.statusCode, text: await response.body.text() };
}

/** Common headers: JSON content type, bearer key when set, environment when set. */
export function baseHeaders(apiKey: string | undefined, environment: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  if (environment) headers['X-Ironflow-Environment'] = environment;
  return headers;
}

/** Parses a JSON body; `undefined` for an empty or non-JSON body. */
export function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Turns a non-2xx answer into an {@link IronflowClientError}: `code` and `message` from the JSON
 * body `{code, message}` (Connect's error shape), else `HTTP_<status>` and the first 200
 * characters of the body; `engineCode` from the body's `ironflowCode` (a non-empty string) when
 * present.
 */
export function httpError(what: string, response: RawResponse): IronflowClientError {
  type ErrorBody = { code?: unknown; message?: unknown; ironflowCode?: unknown };
  const body = parseJson(response.text) as (ErrorBody & { error?: ErrorBody }) | undefined;
  const source: ErrorBody | undefined = body && typeof body === 'object' ? (body.error && typeof body.error === 'object' ? body.error : body) : undefined;
  const code = typeof source?.code === 'string' && source.code !== '' ? source.code : `HTTP_${response.status}`;
  const engineCode = typeof source?.ironflowCode === 'string' && source.ironflowCode !== '' ? source.ironflowCode : undefined;
  const message =
    typeof source?.message === 'string' && source.message !== ''
      ? source.message
      : response.text.trim() !== ''
        ? response.text.slice(0, 200)
        : `HTTP ${response.status}`;
  return new IronflowClientError(`${what}: ${message}`, code, response.status, engineCode ? { engineCode } : {});
}

/**
 * Whether a registration answer is a refusal no retry can change: a 4xx other than 408 (timeout),
 * 409 (conflict) and 429 (rate limit) — bad credentials (401/403), an invalid function or worker
 * (400 `VALIDATION_ERROR`), a route or function the server does not have (404) — and a body too
 * large (429 `resource_exhausted` with engine code `PAYLOAD_TOO_LARGE`, the Connect answer). A
 * worker stops and its `start()` rejects with it instead of registering again and again.
 */
export function isPermanentRefusal(err: unknown): err is IronflowClientError {
  if (!(err instanceof IronflowClientError)) return false;
  if (err.engineCode === 'PAYLOAD_TOO_LARGE') return true;
  return err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 409 && err.status !== 429;
}

/** Turns a network failure or abort into an {@link IronflowClientError} (`TIMEOUT` or `NETWORK_ERROR`, status 0). */
export function networkError(what: string, err: unknown): IronflowClientError {
  const name = (err as { name?: string } | undefined)?.name;
  const code = name === 'TimeoutError' ? 'TIMEOUT' : name === 'AbortError' ? 'ABORTED' : 'NETWORK_ERROR';
  return new IronflowClientError(`${what}: ${errorMessage(err)}`, code, 0, { cause: err });
}

/**
 * Connect unary JSON call (WIRE-PROTOCOL.md 5.1): `POST <baseUrl>/<service>/<method>` with a JSON
 * body. Resolves to the parsed JSON answer (`{}` for an empty body). Throws
 * {@link IronflowClientError} on a non-2xx status (code/message from the body), on a network
 * failure (`NETWORK_ERROR`), on timeout (`TIMEOUT`) and on a 2xx body that is not JSON
 * (`INVALID_RESPONSE`).
 */
export async function connectUnary(
  baseUrl: string,
  procedure: string,
  body: unknown,
  options: { headers: Record<string, string>; timeoutMs?: number; signal?: AbortSignal },
): Promise<Record<string, unknown>> {
  const what = procedure.slice(procedure.lastIndexOf('/') + 1);
  let response: RawResponse;
  try {
    response = await sendRaw(`${baseUrl}/${procedure}`, { method: 'POST', headers: options.headers, body, timeoutMs: options.timeoutMs, signal: options.signal });
  } catch (err) {
    throw networkError(what, err);
  }
  if (response.status < 200 || response.status >= 300) throw httpError(what, response);
  if (response.text.trim() === '') return {};
  const parsed = parseJson(response.text);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new IronflowClientError(`${what}: response is not a JSON object`, 'INVALID_RESPONSE', response.status);
  }
  return parsed as Record<string, unknown>;
}

/**
 * REST GET (`GET <baseUrl>/<path>?<query>`; WIRE-PROTOCOL.md 5.6): query parameters that are
 * `undefined` or `""` are left out. Resolves to the parsed JSON object; throws
 * {@link IronflowClientError} like {@link connectUnary} (the REST error body `{code, message}`
 * gives `code`).
 */
export async function restGet(
  baseUrl: string,
  path: string,
  query: Record<string, string | number | undefined>,
  options: { headers: Record<string, string>; timeoutMs?: number },
): Promise<Record<string, unknown>> {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== '') params.set(key, String(value));
  const url = `${baseUrl}/${path}${params.size ? `?${params}` : ''}`;
  const what = `GET /${path}`;
  let response: RawResponse;
  try {
    response = await sendRaw(url, { method: 'GET', headers: options.headers, timeoutMs: options.timeoutMs });
  } catch (err) {
    throw networkError(what, err);
  }
  if (response.status < 200 || response.status >= 300) throw httpError(what, response);
  const parsed = parseJson(response.text);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new IronflowClientError(`${what}: response is not a JSON object`, 'INVALID_RESPONSE', response.status);
  }
  return parsed as Record<string, unknown>;
}
