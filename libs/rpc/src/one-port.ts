/**
 * One TCP port for HTTP/1.1 and cleartext HTTP/2 (DESIGN.md "One port, several protocols";
 * WIRE-PROTOCOL.md 4.1 [I]: the streaming worker speaks h2c with prior knowledge on the same base
 * URL as the REST and JSON calls).
 */
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as net from 'node:net';

/** The client connection preface every HTTP/2 connection starts with (RFC 9113 3.4). */
const HTTP2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export interface OnePortOptions {
  /** TCP port; 0 picks a free one (read it back from the result). */
  port: number;
  /** Bind address; default: all interfaces (Node's default). */
  host?: string;
  /**
   * The HTTP/1.1 side: an existing, not listening `http.Server` (e.g. Nest's
   * `app.getHttpServer()` after `app.init()`), or a request listener to build one with.
   */
  http1: http.Server | http.RequestListener;
  /** The HTTP/2 side, e.g. `connectNodeAdapter({ routes })` (Connect, gRPC, gRPC-Web). */
  http2Handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;
  /** Options of the internal `http2.createServer` (h2c). */
  http2Options?: http2.ServerOptions;
  /** A connection that sends no decisive bytes within this time is closed. Default 30000 ms. */
  peekTimeoutMs?: number;
  /**
   * `close()` first closes gracefully (stop accepting, HTTP/2 GOAWAY, idle HTTP/1 connections
   * closed) and destroys whatever is still open after this many ms. Default 2000 ms.
   */
  closeGraceMs?: number;
}

export interface OnePortServer {
  /** The bound port (the real one when `port` was 0). */
  port: number;
  /**
   * Stops accepting and ends every connection and HTTP/2 session; resolves when all are gone.
   * Requests in flight get up to `graceMs` (default the `closeGraceMs` option) to finish.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Listens on one port and routes each TCP connection by its first bytes: the HTTP/2 preface
 * (`PRI * HTTP/2.0…`) goes to an internal h2c server (`http2.createServer`, prior knowledge)
 * running `http2Handler`; anything else goes to the HTTP/1 server, via
 * `server.emit('connection', socket)` with the peeked bytes pushed back into the socket.
 *
 * Resolves once listening; rejects with the listen error (e.g. EADDRINUSE). TLS is not handled
 * here (terminate it in front). Only HTTP/1.1 reaches `http1`: an h2c request for a REST route
 * gets the HTTP/2 handler's 404.
 */
export async function listenOnePort(options: OnePortOptions): Promise<OnePortServer> {
  const peekTimeoutMs = options.peekTimeoutMs ?? 30_000;
  const closeGraceMs = options.closeGraceMs ?? 2_000;
  const h1 = typeof options.http1 === 'function' ? http.createServer(options.http1) : options.http1;
  const h2 = http2.createServer(options.http2Options ?? {}, options.http2Handler);

  let closing: Promise<void> | undefined;
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  const http2Sockets = new WeakSet<net.Socket>();
  // HTTP/1 connections → requests in flight on each. Node tracks idle connections only for a
  // server that listens itself, so closing idle keep-alive connections is done here.
  const http1InFlight = new Map<net.Socket, number>();
  const onHttp1Request = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    if (!http1InFlight.has(socket)) return;
    http1InFlight.set(socket, (http1InFlight.get(socket) ?? 0) + 1);
    if (closing) res.shouldKeepAlive = false;
    res.once('close', () => {
      const left = (http1InFlight.get(socket) ?? 1) - 1;
      http1InFlight.set(socket, left);
      if (closing && left === 0) socket.destroy();
    });
  };
  h1.on('request', onHttp1Request);
  h2.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      http1InFlight.delete(socket);
    });
    routeConnection(socket, peekTimeoutMs, (isHttp2) => {
      if (isHttp2) {
        // The HTTP/2 session reads the unshifted bytes itself; the socket must stay paused.
        http2Sockets.add(socket);
        h2.emit('connection', socket);
      } else {
        http1InFlight.set(socket, 0);
        h1.emit('connection', socket);
        socket.resume();
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(options.port, options.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;

  const close = (graceMs = closeGraceMs): Promise<void> => {
    closing ??= (async () => {
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of sessions) session.close();
      for (const socket of sockets) {
        const inFlight = http1InFlight.get(socket);
        // Idle HTTP/1 connections and connections still being peeked end now.
        if (inFlight === 0 || (inFlight === undefined && !http2Sockets.has(socket))) socket.destroy();
      }
      await waitUntil(() => sockets.size === 0, graceMs);
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      h1.off('request', onHttp1Request);
      await serverClosed;
    })();
    return closing;
  };

  return { port, close };
}

/**
 * Reads a new connection's first bytes until they either match the HTTP/2 preface completely or
 * stop matching it, pushes them back into the (paused) socket and calls `decide`.
 */
function routeConnection(socket: net.Socket, peekTimeoutMs: number, decide: (isHttp2: boolean) => void): void {
  let peeked = Buffer.alloc(0);
  const timer = setTimeout(() => socket.destroy(), peekTimeoutMs);
  timer.unref();
  const onError = () => socket.destroy();
  const onClose = () => cleanup();
  const cleanup = () => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('error', onError);
    socket.off('close', onClose);
  };
  const onData = (chunk: Buffer) => {
    peeked = peeked.length === 0 ? chunk : Buffer.concat([peeked, chunk]);
    const n = Math.min(peeked.length, HTTP2_PREFACE.length);
    const matches = peeked.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n));
    if (matches && peeked.length < HTTP2_PREFACE.length) return;
    cleanup();
    socket.pause();
    socket.unshift(peeked);
    decide(matches);
  };
  socket.on('data', onData);
  socket.on('error', onError);
  socket.on('close', onClose);
}

/** Resolves when `done()` holds (checked every 10 ms) or after `timeoutMs`, whichever is first. */
function waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve) => {
    const tick = () => (done() || Date.now() >= deadline ? resolve() : setTimeout(tick, 10));
    tick();
  });
}
