import { Controller, Inject, Param, Post, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { RUN_ID_HEADER, handlePubSubUnaryJson, unaryJsonError } from '@ironflow/rpc';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { scopeOf } from '../http/scope';

/**
 * Connect unary JSON over HTTP/1.1 for `ironflow.v1.PubSubService` (WIRE-PROTOCOL.md 5.2, 5.4):
 * Emit, Publish (`client.publish`, `step.publish` with `X-Ironflow-Run-ID`) and ListTopics.
 */
@Controller('ironflow.v1.PubSubService')
export class PubSubRpcController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  @Post(':method')
  async call(@Param('method') method: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    let result;
    try {
      const { engine } = this.runtime;
      result = await handlePubSubUnaryJson({ pubsub: engine.pubsub, api: engine.api }, scopeOf(req), method, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0), req.header(RUN_ID_HEADER), {
        maxBodyBytes: this.runtime.settings.maxPayloadBytes,
      });
    } catch (err) {
      result = unaryJsonError(err);
    }
    res.status(result.status).json(result.body);
  }
}
