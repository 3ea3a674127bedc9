import { DynamicModule, Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { HealthController } from '../health/health.controller';
import { ApiKeyGuard } from '../http/api-key.guard';
import { EngineRuntime } from './engine-runtime';
import { ENGINE_RUNTIME } from './tokens';

@Global()
@Module({})
export class CoreModule implements OnApplicationShutdown {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  /**
   * The shared core: the process's `EngineRuntime` (opened before Nest starts, so a start-up
   * problem is reported by the service, not by Nest's exception handler), `/health`, `/ready`,
   * `/metrics`, and the API key guard of every HTTP/1 route.
   */
  static forRoot(runtime: EngineRuntime): DynamicModule {
    return {
      module: CoreModule,
      controllers: [HealthController],
      providers: [
        // A factory, not `useValue`: Nest hashes a dynamic module's metadata, and the runtime is large.
        { provide: ENGINE_RUNTIME, useFactory: () => runtime },
        { provide: APP_GUARD, useClass: ApiKeyGuard },
      ],
      exports: [ENGINE_RUNTIME],
    };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.runtime.close();
  }
}
