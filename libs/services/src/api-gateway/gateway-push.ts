import { Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

/**
 * The api-gateway calls the push runs of its sync triggers itself (issue 11; `IRONFLOW_GATEWAY_PUSH`,
 * default true): each TriggerSync of a push function whose lane has room creates, claims and
 * leases its run in one statement and calls the endpoint at once, so the call's path has no hop
 * through NATS to a dispatcher and back; the outcome's RESULTS frame reaches the waiting call in
 * process. Only the runs this node claims itself: no claim loop (engine role `pushAtOnce`). With its
 * push slots full, a sync trigger goes to a dispatcher as before (`NatsTriggerForwarder`). The
 * runtime's close drains the calls in flight.
 */
@Injectable()
export class GatewayPush implements OnApplicationBootstrap {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  onApplicationBootstrap(): void {
    if (this.runtime.settings.gatewayPush) this.runtime.engine.start({ pushDispatch: false, pushAtOnce: true, scheduler: false });
  }
}
