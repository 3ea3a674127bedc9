import type { IronflowSettings } from '@ironflow/services';
import { startTestServer } from '@ironflow/testing';
/**
 * Shared plumbing for the golden wire tests (`test-e2e/wire/`). Everything here talks to the
 * engine with raw `fetch` and raw `http.createServer`; nothing comes from `libs/sdk`, so the
 * engine and our SDK cannot agree on a mistake (DESIGN.md "Wire protocols").
 *
 * - `startWireEngine(store)`: a real engine (`startServer`, all five services) on a fresh SQLite
 *   file or a fresh PostgreSQL database of its own (dropped on close).
 * - `connect()` / `rest()`: one raw HTTP call, answering status, headers, text and parsed JSON.
 * - `startPushEndpoint()`: an HTTP server that records every engine request and answers scripted
 *   PushResponses.
 * - `findNulls()`, `waitFor()`.
 */
import { randomBytes } from 'node:crypto';
import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import { AddressInfo } from 'node:net';

export type WireStore = 'sqlite' | 'postgres';
export const WIRE_STORES: WireStore[] = ['sqlite', 'postgres'];

export interface WireEngine {
  url: string;
  port: number;
  /** Every HTTP/1 route the server answers (Express's router), e.g. `GET /api/v1/runs/:id`. */
  routes: { method: string; path: string }[];
  close(): Promise<void>;
}

/** Starts the engine with short intervals on its own store (`settings` overrides); `close()` stops it and drops the store. */
export async function startWireEngine(store: WireStore, settings: Partial<IronflowSettings> = {}): Promise<WireEngine> {
  const { server, close } = await startTestServer(store, 'ironflow_wire', settings);
  type Layer = { route?: { path: string; methods: Record<string, boolean> } };
  const stack = (server.app.getHttpAdapter().getInstance() as { _router: { stack: Layer[] } })._router.stack;
  const routes = stack.flatMap((l) => (l.route ? Object.keys(l.route.methods).map((m) => ({ method: m.toUpperCase(), path: l.route!.path })) : []));
  return {
    url: server.url,
    port: server.port,
    routes,
    close,
  };
}


export interface RawAnswer<T = any> {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: T;
}

async function answer(res: Response): Promise<RawAnswer> {
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * One Connect unary JSON call, as WIRE-PROTOCOL.md 5.1 describes the SDK's: `POST
 * <base>/ironflow.v1.IronflowService/<method>`, `Content-Type: application/json`, no
 * `Connect-Protocol-Version` header. `body` is sent as is when it is a string (malformed JSON tests).
 */
export async function connect(base: string, method: string, body: unknown, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const res = await fetch(`${base}/ironflow.v1.IronflowService/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return answer(res);
}

/** One REST call with the headers every worker call carries (3.1). A string body is sent as is. */
export async function rest(base: string, method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown, env = 'default', headers: Record<string, string> = {}): Promise<RawAnswer> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-ironflow-environment': env, ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  return answer(res);
}

/** What the push endpoint received. */
export interface RecordedPush {
  /** `Date.now()` when the request's body had arrived. */
  at: number;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
}

/** A scripted reply: an HTTP status (200 by default) and a JSON body. */
export interface PushReply {
  status?: number;
  body: unknown;
}

export interface PushEndpoint {
  /** `http://127.0.0.1:<port>` */
  base: string;
  requests: RecordedPush[];
  /** Requests for one function id, in arrival order. */
  requestsFor(functionId: string): RecordedPush[];
  /** Sets how requests of `functionId` are answered: each request gets `script(req, nthForThisFunction)`. */
  script(functionId: string, reply: (req: RecordedPush, n: number) => PushReply | Promise<PushReply>): void;
  close(): Promise<void>;
}

/** An in-test push endpoint (WIRE-PROTOCOL.md 2): records requests, answers scripted PushResponses. */
export async function startPushEndpoint(): Promise<PushEndpoint> {
  const requests: RecordedPush[] = [];
  const scripts = new Map<string, (req: RecordedPush, n: number) => PushReply | Promise<PushReply>>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const rec: RecordedPush = { at: Date.now(), method: req.method ?? '', url: req.url ?? '', headers: req.headers, raw, body };
      requests.push(rec);
      const fnId = body?.function_id as string | undefined;
      const script = fnId ? scripts.get(fnId) : undefined;
      let reply: PushReply;
      try {
        const n = requests.filter((r) => r.body?.function_id === fnId).length - 1;
        reply = script ? await script(rec, n) : { status: 404, body: { error: { message: 'no script', code: 'FUNCTION_NOT_FOUND' } } };
      } catch (err) {
        reply = { status: 500, body: { error: { message: String(err), code: 'INTERNAL_ERROR' } } };
      }
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}`,
    requests,
    requestsFor: (id) => requests.filter((r) => r.body?.function_id === id),
    script: (id, reply) => scripts.set(id, reply),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** JSON paths (`a.b[0].c`) of every `null` in `value`. */
export function findNulls(value: unknown, path = '$'): string[] {
  if (value === null) return [path];
  if (Array.isArray(value)) return value.flatMap((v, i) => findNulls(v, `${path}[${i}]`));
  if (typeof value === 'object' && value !== undefined) {
    return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => findNulls(v, `${path}.${k}`));
  }
  return [];
}

/** Polls `probe` until it returns a value that is not undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 10_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v as T;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Reads a run with raw GetRun JSON until `accept(run)` holds. */
export function waitForRun(base: string, runId: string, accept: (run: any) => boolean, timeoutMs = 10_000): Promise<any> {
  return waitFor(`run ${runId}`, async () => {
    const r = await connect(base, 'GetRun', { id: runId });
    return r.status === 200 && accept(r.json) ? r.json : undefined;
  }, timeoutMs);
}

/** A unique id usable as a function id, event name or worker id. */
export function uid(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** An ISO-8601 string a given number of ms from now. */
export function isoIn(ms: number): string {
  return new Date(Date.now() + ms).toISOString();
}

/** True for an ISO-8601 UTC timestamp string that parses. */
export function isIsoTime(v: unknown): boolean {
  return typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v) && !Number.isNaN(Date.parse(v));
}
