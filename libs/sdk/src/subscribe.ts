import { WebSocket } from 'ws';
import { IronflowClientError } from './errors';

/** One event a subscription delivers: the topic (or `system.run.<id>.<event>`), its data, and for topics the message id. */
export interface SubscriptionEvent<T = unknown> {
  topic: string;
  data: T;
  eventId?: string;
  /** With `includeMetadata`: `timestamp` (ISO-8601). */
  meta?: { timestamp: string };
}

/**
 * Options of `client.subscribe`: `onEvent` for each event; `onError` for an error the engine
 * reports or the connection closing; `includeMetadata` adds `meta.timestamp`; `connectTimeoutMs`
 * (default 10000) bounds the connect and the subscribe answer.
 */
export interface SubscribeOptions<T = unknown> {
  onEvent: (event: SubscriptionEvent<T>) => void;
  onError?: (error: { code: string; message: string }) => void;
  includeMetadata?: boolean;
  connectTimeoutMs?: number;
}

/** A live subscription: `unsubscribe()` ends it and closes its connection. */
export interface Subscription {
  id: string;
  pattern: string;
  unsubscribe(): void;
}

/**
 * Opens one WebSocket to `<serverUrl>/ws` (env and key as the `env` / `token` query parameters,
 * as the Ironflow SDK sends them), subscribes to `pattern` (`topic:<pattern>` or
 * `system.run.<pattern>`, docs/SUBSCRIPTIONS.md) and resolves once the engine confirmed it.
 * Delivery is live and at most once; there is no reconnect: `onError` gets `CONNECTION_CLOSED`.
 * Rejects with {@link IronflowClientError} (the engine's code, e.g. `VALIDATION_ERROR`, or
 * `NETWORK_ERROR` / `TIMEOUT`).
 */
export function openSubscription<T>(serverUrl: string, auth: { apiKey?: string; environment?: string }, pattern: string, options: SubscribeOptions<T>): Promise<Subscription> {
  const url = new URL(`${serverUrl.replace(/^http/, 'ws')}/ws`);
  if (auth.environment) url.searchParams.set('env', auth.environment);
  if (auth.apiKey) url.searchParams.set('token', auth.apiKey);
  const ws = new WebSocket(url);
  let subscriptionId: string | undefined;
  let closedByUs = false;
  return new Promise<Subscription>((resolve, reject) => {
    const timer = setTimeout(() => fail(new IronflowClientError(`subscribe ${pattern}: no answer in time`, 'TIMEOUT', 0)), options.connectTimeoutMs ?? 10_000);
    const fail = (err: IronflowClientError) => {
      clearTimeout(timer);
      closedByUs = true;
      ws.terminate();
      reject(err);
    };
    ws.on('unexpected-response', (_req, res) => fail(new IronflowClientError(`subscribe ${pattern}: the engine answered HTTP ${res.statusCode}`, `HTTP_${res.statusCode}`, res.statusCode ?? 0)));
    ws.on('error', (err) => { if (!subscriptionId) fail(new IronflowClientError(`subscribe ${pattern}: ${err.message}`, 'NETWORK_ERROR', 0, { cause: err })); });
    ws.on('open', () => ws.send(JSON.stringify({ type: 'subscribe', subscription: { pattern, ...(options.includeMetadata ? { options: { includeMetadata: true } } : {}) } })));
    ws.on('close', () => {
      if (subscriptionId && !closedByUs) options.onError?.({ code: 'CONNECTION_CLOSED', message: `the subscription to ${pattern} lost its connection` });
    });
    ws.on('message', (raw) => {
      let message: any;
      try {
        message = JSON.parse(raw.toString());
      } catch {
        return;
      }
      if (message.type === 'subscription_result') {
        const result = message.results?.[0];
        if (result?.status !== 'ok' || typeof result.subscriptionId !== 'string') {
          return fail(new IronflowClientError(`subscribe ${pattern}: ${result?.message ?? 'refused'}`, result?.code ?? 'SUBSCRIPTION_ERROR', 400));
        }
        clearTimeout(timer);
        subscriptionId = result.subscriptionId as string;
        resolve({ id: subscriptionId, pattern, unsubscribe: () => { closedByUs = true; ws.close(1000, 'unsubscribed'); } });
      } else if (message.type === 'event' && message.subscriptionId === subscriptionId) {
        options.onEvent({ topic: message.topic, data: message.data, ...(message.eventId ? { eventId: message.eventId } : {}), ...(message.meta ? { meta: message.meta } : {}) });
      } else if (message.type === 'error' || message.type === 'subscription_error') {
        if (!subscriptionId) return fail(new IronflowClientError(`subscribe ${pattern}: ${message.message}`, message.code ?? 'SUBSCRIPTION_ERROR', 400));
        options.onError?.({ code: String(message.code), message: String(message.message) });
      }
    });
  });
}
