import { Controller, Get, Header, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { PublicRoute } from '../http/api-key.guard';

/** `/health` (the process answers), `/ready` (the store answers and the process is not draining: else 503), `/metrics` (Prometheus text). */
@PublicRoute()
@Controller()
export class HealthController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  @Get('health')
  health() {
    return { status: 'ok' };
  }

  @Get('ready')
  async ready(@Res() res: Response) {
    if (this.runtime.draining) {
      res.status(503).json({ status: 'draining' });
      return;
    }
    try {
      await this.runtime.store.read('ready', (tx) => tx.query('SELECT 1 AS one'));
      res.status(200).json({ status: 'ready' });
    } catch (err) {
      res.status(503).json({ status: 'unavailable', message: String(err) });
    }
  }

  @Get('metrics')
  @Header('Content-Type', 'text/plain; version=0.0.4')
  metrics() {
    return this.runtime.metrics.registry.metrics();
  }
}
