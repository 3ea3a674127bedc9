import { Controller, Inject, Param, Post, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { handleUnaryJson, unaryJsonError } from '@ironflow/rpc';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { scopeOf } from '../http/scope';

/**
 * Connect unary JSON over HTTP/1.1 for `ironflow.v1.IronflowService` (WIRE-PROTOCOL.md 5.1, 5.2),
 * through the compatibility layer of `libs/rpc` (lowercase statuses, aliases, both key spellings).
 * gRPC and binary Connect reach the same service over HTTP/2 on the same port.
 */
@Controller('ironflow.v1.IronflowService')
export class ClientRpcController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  @Post(':method')
  async call(@Param('method') method: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    let result;
    try {
      result = await handleUnaryJson(this.runtime.engine.api, scopeOf(req), method, Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0), {
        maxBodyBytes: this.runtime.settings.maxPayloadBytes,
      });
    } catch (err) {
      result = unaryJsonError(err); // a bad scope header, answered in the Connect error shape
    }
    // Written straight to the socket: what `res.json` sends less its ETag (a POST's answer is never
    // revalidated), without Express's per-response work (ETag hash, freshness check, charset handling).
    const json = JSON.stringify(result.body);
    res.writeHead(result.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) });
    res.end(json);
  }
}
