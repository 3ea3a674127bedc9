import { setImmediate as nextTurn } from 'node:timers/promises';
import { TriggerOutput } from '@ironflow/contracts';
import { NatsBus, Subscription } from '@ironflow/bus';
import { EngineLogger, EngineMetrics } from '@ironflow/observability';
import { FORWARDED_TRIGGER_PATTERN, FORWARDED_TRIGGER_QUEUE, ForwardedTrigger, TriggerForwarder, forwardedTriggerSubject, outputOf } from './trigger-forwarding';
import type { TriggerSystem } from './trigger-system';

/** What the forwarder needs of the bus: a core NATS request on a logical subject (`NatsBus.request`). */
export type TriggerRequester = Pick<NatsBus, 'request'>;

/**
 * The api-gateway's {@link TriggerForwarder} over NATS: a core request on
 * `ironflow.{project}.{env}.trigger.sync` (namespaced by the bus, `ifx.{clusterId}.…`), which one
 * dispatcher of the queue group answers (`TriggerSystem.triggerForwarded`). No responders (NATS
 * 503, at once), `busy`, no answer within `timeoutMs`, or any other failure of the request resolve
 * `undefined`: the gateway triggers itself, with the event id it drew. Counted in
 * `ironflow_trigger_forwards_total{result}`.
 */
export class NatsTriggerForwarder implements TriggerForwarder {
  constructor(
    private readonly bus: TriggerRequester,
    private readonly metrics: EngineMetrics,
    /** How long to wait for a dispatcher's answer, ms (engine config `triggerForwardTimeoutMs`). */
    private readonly timeoutMs: number,
  ) {}

  async forward(request: ForwardedTrigger): Promise<TriggerOutput | undefined> {
    let reply: unknown;
    try {
      reply = await this.bus.request(forwardedTriggerSubject(request.scope.project, request.scope.env), request, this.timeoutMs);
    } catch (err) {
      this.metrics.triggerForwards.inc({ result: (err as { code?: string }).code === '503' ? 'no_responders' : 'failed' });
      return undefined;
    }
    let output: TriggerOutput | undefined;
    try {
      output = outputOf(reply);
    } finally {
      // An EngineError thrown here is an answer too: the dispatcher's trigger refused the event.
      this.metrics.triggerForwards.inc({ result: output || (reply as { error?: unknown } | null)?.error ? 'answered' : 'busy' });
    }
    return output;
  }
}

/** What the dispatcher's side needs of the bus: answering requests in a queue group (`NatsBus.respond`). */
export type TriggerResponder = Pick<NatsBus, 'respond'>;

/**
 * A dispatcher's side: answers the forwarded sync triggers of every project and env
 * (`ironflow.*.*.trigger.sync`) in the queue group `{clusterId}-dispatcher`, with
 * `triggers.triggerForwarded` (`busy` when no push slot freed in time or its push dispatch stopped). A
 * trigger that fails without an `EngineError` is logged and not answered: the gateway triggers
 * itself. Returns the subscription.
 */
export function answerForwardedTriggers(bus: TriggerResponder, triggers: Pick<TriggerSystem, 'triggerForwarded'>, logger: EngineLogger): Subscription {
  return bus.respond(FORWARDED_TRIGGER_PATTERN, FORWARDED_TRIGGER_QUEUE, (_subject, data) =>
    triggers.triggerForwarded(data as ForwardedTrigger).then(
      // Answered on the next turn: a push dispatched at once is written first (undici writes from
      // the check phase), the gateway's answer being off the run's path (its frame is on it).
      (reply) => nextTurn(reply),
      (err: unknown) => {
        logger.warn('forwarded trigger failed; the gateway triggers it itself', { error: String(err) });
        throw err;
      },
    ),
  );
}
