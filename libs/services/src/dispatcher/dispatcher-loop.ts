import { Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { NatsBus } from '@ironflow/bus';
import { answerForwardedTriggers } from '@ironflow/engine';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

/**
 * Starts the push dispatch loop once the app is up; the runtime's close drains it. On NATS it also
 * answers the sync triggers api-gateways forward (claim at trigger, `answerForwardedTriggers`):
 * once the loop stops they are answered `busy`, and the bus's close ends the subscription.
 */
@Injectable()
export class DispatcherLoop implements OnApplicationBootstrap {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  onApplicationBootstrap(): void {
    const { engine, bus } = this.runtime;
    engine.start({ pushDispatch: true, scheduler: false });
    if (bus instanceof NatsBus) answerForwardedTriggers(bus, engine.triggers, engine.resources.logger);
  }
}
