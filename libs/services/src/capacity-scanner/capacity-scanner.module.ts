import { Inject, Injectable, Module, OnApplicationBootstrap } from '@nestjs/common';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

/** Starts the capacity scanner: lease expiry, recovery and the recovery ceiling. */
@Injectable()
export class CapacityScannerLoop implements OnApplicationBootstrap {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  onApplicationBootstrap(): void {
    this.runtime.engine.start({ pushDispatch: false, scheduler: false, scanner: true });
  }
}

/** The capacity-scanner service. */
@Module({ providers: [CapacityScannerLoop] })
export class CapacityScannerModule {}
