import { Inject, Injectable, Module, OnApplicationBootstrap } from '@nestjs/common';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

/** Starts the scheduler tick (sleep sweep, timeout sweeps, waiting-run pass). */
@Injectable()
export class SchedulerLoop implements OnApplicationBootstrap {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  onApplicationBootstrap(): void {
    this.runtime.engine.start({ pushDispatch: false, scheduler: true });
  }
}

/** The scheduler service. */
@Module({ providers: [SchedulerLoop] })
export class SchedulerModule {}
