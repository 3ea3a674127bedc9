import { Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

/** Starts the push dispatch loop once the app is up; the runtime's close drains it. */
@Injectable()
export class DispatcherLoop implements OnApplicationBootstrap {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  onApplicationBootstrap(): void {
    this.runtime.engine.start({ pushDispatch: true, scheduler: false });
  }
}
