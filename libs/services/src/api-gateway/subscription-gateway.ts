import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { Bus } from '@ironflow/bus';
import { CallScope, isEngineError, parseEnvironment } from '@ironflow/contracts';
import { SubscriptionSession } from '@ironflow/engine';

/** The path the SDK's `subscribe` connects to (`<base>/ws`, WIRE-PROTOCOL.md 6). */
export const SUBSCRIPTIONS_PATH = '/ws';
/** A client frame larger than this closes the connection (1009). */
const MAX_FRAME_BYTES = 64 * 1024;
/** A connection whose unsent data passes this is closed (1013): a consumer too slow for its subscriptions. */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

export interface SubscriptionGatewayOptions {
  bus: Bus;
  /**
   * The scope of a connection from its upgrade request; throw an `EngineError` to refuse it
   * (answered with the error's HTTP status before the upgrade). Default {@link subscriptionScopeOf}.
   * An auth guard wraps this (the SDK sends its key as the `token` query parameter).
   */
  scopeOf?: (req: IncomingMessage) => CallScope | Promise<CallScope>;
  /** Ping period, ms; a connection that answered no ping by the next one is ended. Default 30000. */
  pingMs?: number;
}

export interface SubscriptionGateway {
  /** Closes every connection (1001, "server shutting down") and stops accepting upgrades. */
  close(): Promise<void>;
}

/**
 * Project `default`; the environment from the `env` query parameter (what the SDK sends), else
 * the `X-Ironflow-Environment` header, else `default`. Throws `VALIDATION_ERROR` for a name that
 * cannot stand in a subject.
 */
export function subscriptionScopeOf(req: IncomingMessage): CallScope {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const header = req.headers['x-ironflow-environment'];
  return { project: 'default', env: parseEnvironment(url.searchParams.get('env') ?? (Array.isArray(header) ? header[0] : header)) };
}

/**
 * The `<base>/ws` WebSocket endpoint of subscriptions (docs/SUBSCRIPTIONS.md), on the HTTP/1.1
 * server of the one-port listener: each connection gets a {@link SubscriptionSession} over the
 * bus, so it sees what any node publishes (NATS) or what this process publishes (`ironflow dev`).
 * Upgrades on other paths are answered 404.
 */
export function attachSubscriptionGateway(server: Server, options: SubscriptionGatewayOptions): SubscriptionGateway {
  const scopeOf = options.scopeOf ?? subscriptionScopeOf;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  const alive = new WeakMap<WebSocket, boolean>();

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path !== SUBSCRIPTIONS_PATH) return refuse(socket, 404, 'NOT_FOUND', `no WebSocket endpoint at ${path}; subscriptions are at ${SUBSCRIPTIONS_PATH}`);
    Promise.resolve()
      .then(() => scopeOf(req))
      .then((scope) => wss.handleUpgrade(req, socket, head, (ws) => serve(ws, scope)))
      .catch((err) => (isEngineError(err) ? refuse(socket, err.httpStatus, err.code, err.message) : refuse(socket, 500, 'INTERNAL_ERROR', 'internal error')));
  };

  const serve = (ws: WebSocket, scope: CallScope) => {
    alive.set(ws, true);
    ws.on('pong', () => alive.set(ws, true));
    const session = new SubscriptionSession(options.bus, scope, (message) => {
      if (ws.readyState !== WebSocket.OPEN) return;
      if (ws.bufferedAmount > MAX_BUFFERED_BYTES) return ws.close(1013, 'consumer too slow: unsent events passed 8 MiB');
      ws.send(JSON.stringify(message));
    });
    ws.on('message', (data, isBinary) => session.handle(isBinary ? '' : data.toString()));
    ws.on('close', () => session.close());
    ws.on('error', () => session.close());
  };

  const pinger = setInterval(() => {
    for (const ws of wss.clients) {
      if (!alive.get(ws)) ws.terminate();
      else {
        alive.set(ws, false);
        ws.ping();
      }
    }
  }, options.pingMs ?? 30_000);
  pinger.unref();

  server.on('upgrade', onUpgrade);
  return {
    close: async () => {
      clearInterval(pinger);
      server.off('upgrade', onUpgrade);
      for (const ws of wss.clients) ws.close(1001, 'server shutting down');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

function refuse(socket: Duplex, status: number, code: string, message: string): void {
  const body = JSON.stringify({ code, message });
  socket.end(`HTTP/1.1 ${status} ${status === 404 ? 'Not Found' : status === 401 ? 'Unauthorized' : status === 400 ? 'Bad Request' : 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
