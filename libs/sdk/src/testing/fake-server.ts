/**
 * Test helpers for the SDK's specs and the CLI's (`@ironflow/sdk/testing`; not exported from the
 * package, not in the build output): a tiny HTTP server that records requests and answers from a
 * route function, and a deadline-bounded condition wait.
 */
import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  /** `Date.now()` when the request had been read. */
  at: number;
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
}

/** An answer of the fake server; `destroy: true` cuts the connection instead (a network error for the client). */
export interface FakeReply {
  status: number;
  body?: unknown;
  destroy?: boolean;
}

export interface FakeServer {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/** Starts a server on a free port; `route` decides each answer (default 404). */
export async function startFakeServer(route: (req: RecordedRequest) => FakeReply | Promise<FakeReply>): Promise<FakeServer> {
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = raw === '' ? undefined : JSON.parse(raw);
      } catch {
        body = raw;
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      const recorded: RecordedRequest = { at: Date.now(), method: req.method ?? '', path: url.pathname, query: url.searchParams, headers: req.headers, raw, body };
      requests.push(recorded);
      Promise.resolve()
        .then(() => route(recorded))
        .then(
          (reply) => {
            if (reply.destroy) {
              req.socket.destroy();
              return;
            }
            const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
            res.writeHead(reply.status, text === '' ? {} : { 'Content-Type': 'application/json' });
            res.end(text);
          },
          (err) => {
            res.writeHead(500);
            res.end(String(err));
          },
        );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Resolves with the first truthy value of `check`, polling every 5 ms; rejects after `timeoutMs`
 * (default 5000). `check` must not return a promise (it would be awaited, not tested).
 */
export async function waitFor<T>(check: () => T | undefined | null | false, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A promise with its resolver, for holding a handler or a route at a known point. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
