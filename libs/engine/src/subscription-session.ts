import { randomBytes } from 'node:crypto';
import { Bus, Subscription, subjects } from '@ironflow/bus';
import { CallScope, TopicMessage, WsClientMessage, WsServerMessage, WsSubscribeOptions } from '@ironflow/contracts';

/** Most subscriptions one connection may hold. */
export const MAX_SUBSCRIPTIONS_PER_CONNECTION = 100;
/** A pattern token: a subject token, or a wildcard (`>` last only). */
const TOKEN = /^[A-Za-z0-9_:\\-]+$/;

/**
 * One `<base>/ws` connection's subscriptions (docs/SUBSCRIPTIONS.md), transport-free: `handle`
 * takes each text frame, `send` gets each answer and event. Patterns:
 * - `topic:<pattern>`: developer topics of the connection's project and env (messages of
 *   `Publish` / `step.publish`), on `public.{project}.{env}.topic.<pattern>`;
 * - `system.run.<pattern>` (e.g. `system.run.<id>.>`): the engine's run and step events,
 *   `public.{env}.system.run.<pattern>`.
 * `*` matches one token, `>` one or more (last only). Delivery is live and at most once (a core
 * subscription of the bus): no replay, no resume cursor, no consumer groups or manual acks —
 * options asking for those are refused in the `subscription_result` with `VALIDATION_ERROR`
 * naming them. `includeMetadata` adds `meta.timestamp` (the publish time for topics, the
 * delivery time for run events).
 */
export class SubscriptionSession {
  private readonly subscriptions = new Map<string, { pattern: string; sub: Subscription }>();
  private closed = false;

  constructor(
    private readonly bus: Bus,
    private readonly scope: CallScope,
    private readonly send: (message: WsServerMessage) => void,
  ) {}

  /** One client frame. Never throws: a bad frame is answered with an `error` message. */
  handle(text: string): void {
    if (this.closed) return;
    let message: WsClientMessage;
    try {
      message = JSON.parse(text) as WsClientMessage;
    } catch {
      return this.send({ type: 'error', code: 'INVALID_JSON', message: 'a frame must be a JSON object' });
    }
    switch (message?.type) {
      case 'subscribe':
        return this.subscribe(message.subscription);
      case 'unsubscribe':
        this.subscriptions.get(message.subscriptionId)?.sub.unsubscribe();
        this.subscriptions.delete(message.subscriptionId);
        return;
      case 'ack':
        return this.send({ type: 'error', code: 'VALIDATION_ERROR', message: 'ack: this engine has no consumer groups or manual acknowledgement; nothing to acknowledge' });
      default:
        return this.send({ type: 'error', code: 'VALIDATION_ERROR', message: `type ${JSON.stringify((message as { type?: unknown })?.type)}: one of subscribe, unsubscribe, ack` });
    }
  }

  /** Ends every subscription (the connection closed). */
  close(): void {
    this.closed = true;
    for (const { sub } of this.subscriptions.values()) sub.unsubscribe();
    this.subscriptions.clear();
  }

  get size(): number {
    return this.subscriptions.size;
  }

  private subscribe(request: { pattern?: unknown; options?: WsSubscribeOptions } | undefined): void {
    const pattern = typeof request?.pattern === 'string' ? request.pattern : '';
    const refuse = (code: string, message: string) => this.send({ type: 'subscription_result', results: [{ pattern, status: 'error', code, message }] });
    const refused = refusedOptions(request?.options ?? {});
    if (refused.length) return refuse('VALIDATION_ERROR', `not supported by this engine: ${refused.join(', ')}`);
    const target = this.subjectOf(pattern);
    if (typeof target !== 'object') return refuse('VALIDATION_ERROR', target);
    if (this.subscriptions.size >= MAX_SUBSCRIPTIONS_PER_CONNECTION) return refuse('VALIDATION_ERROR', `a connection holds at most ${MAX_SUBSCRIPTIONS_PER_CONNECTION} subscriptions`);
    const id = `sub_${randomBytes(9).toString('base64url')}`;
    const withMeta = request?.options?.includeMetadata === true;
    const sub = this.bus.subscribe(target.subject, (m) => {
      if (this.closed || !this.subscriptions.has(id)) return;
      if (target.kind === 'topic') {
        const msg = m.data as TopicMessage | null;
        if (!msg || typeof msg.topic !== 'string') return;
        this.send({ type: 'event', subscriptionId: id, topic: msg.topic, data: msg.data ?? null, eventId: msg.eventId, ...(withMeta ? { meta: { timestamp: msg.publishedAt } } : {}) });
      } else {
        this.send({ type: 'event', subscriptionId: id, topic: m.subject.slice(target.strip), data: m.data ?? null, ...(withMeta ? { meta: { timestamp: new Date().toISOString() } } : {}) });
      }
    });
    this.subscriptions.set(id, { pattern, sub });
    this.send({ type: 'subscription_result', results: [{ pattern, status: 'ok', subscriptionId: id }] });
  }

  /** The bus subject of a pattern, or why it is refused. */
  private subjectOf(pattern: string): { kind: 'topic' | 'run'; subject: string; strip: number } | string {
    const supported = 'supported: "topic:<pattern>" and "system.run.<pattern>"';
    if (pattern.startsWith('topic:')) {
      const rest = pattern.slice('topic:'.length);
      if (!validTokens(rest)) return `pattern ${JSON.stringify(pattern)}: the topic pattern must be dot-separated tokens, "*" or a final ">" (${supported})`;
      return { kind: 'topic', subject: subjects.topic(this.scope.project, this.scope.env, rest), strip: 0 };
    }
    if (pattern.startsWith('system.run.')) {
      if (!validTokens(pattern)) return `pattern ${JSON.stringify(pattern)}: dot-separated tokens, "*" or a final ">" (${supported})`;
      const prefix = `public.${this.scope.env}.`;
      return { kind: 'run', subject: `${prefix}${pattern}`, strip: prefix.length };
    }
    return `pattern ${JSON.stringify(pattern)} is not supported by this engine (${supported})`;
  }
}

function validTokens(pattern: string): boolean {
  if (pattern === '' || pattern.length > 512) return false;
  const tokens = pattern.split('.');
  return tokens.every((t, i) => t === '*' || (t === '>' && i === tokens.length - 1) || TOKEN.test(t));
}

/** Subscription options this engine does not act on, named as the client sent them. */
function refusedOptions(o: WsSubscribeOptions): string[] {
  const refused: string[] = [];
  if (o.replay !== undefined && o.replay !== null && Number(o.replay) !== 0) refused.push('replay');
  if (o.startAfterSequence !== undefined && o.startAfterSequence !== null) refused.push('startAfterSequence');
  if (o.filter) refused.push('filter');
  if (o.consumerGroup) refused.push('consumerGroup');
  if (o.ackMode && !/^(auto|ack_mode_auto|ack_mode_unspecified)$/i.test(String(o.ackMode))) refused.push(`ackMode ${JSON.stringify(o.ackMode)}`);
  if (o.backpressure && !/^(buffer|backpressure_mode_buffer|backpressure_mode_unspecified)$/i.test(String(o.backpressure))) refused.push(`backpressure ${JSON.stringify(o.backpressure)}`);
  if (o.namespace && o.namespace !== 'default') refused.push('namespace');
  return refused;
}
