import { DynamicModule, Global, Inject, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { EngineLogger } from '@ironflow/observability';
import { HealthController } from '../health/health.controller';
import { ApiKeyGuard } from '../http/api-key.guard';
import { EngineRuntime } from './engine-runtime';
import { IronflowSettings } from './settings';
import { ENGINE_RUNTIME } from './tokens';

const nestLogger = new Logger('ironflow');
/** The engine logs through Nest's logger. */
export const engineLogger: EngineLogger = {
  log: (m, meta) => nestLogger.log(meta ? `${m} ${JSON.stringify(meta)}` : m),
  warn: (m, meta) => nestLogger.warn(meta ? `${m} ${JSON.stringify(meta)}` : m),
  error: (m, meta) => nestLogger.error(meta ? `${m} ${JSON.stringify(meta)}` : m),
};

@Global()
@Module({})
export class CoreModule implements OnApplicationShutdown {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  /** The shared core: one `EngineRuntime`, `/health`, `/ready`, `/metrics`, and the API key guard of every HTTP/1 route. */
  static forRoot(settings: IronflowSettings): DynamicModule {
    return {
      module: CoreModule,
      controllers: [HealthController],
      providers: [
        { provide: ENGINE_RUNTIME, useFactory: () => EngineRuntime.open(settings, engineLogger) },
        { provide: APP_GUARD, useClass: ApiKeyGuard },
      ],
      exports: [ENGINE_RUNTIME],
    };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.runtime.close();
  }
}
