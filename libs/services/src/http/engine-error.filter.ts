import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { EngineError, isEngineError } from '@ironflow/contracts';
import { unaryJsonError } from '@ironflow/rpc';
import { wrongServiceHint } from './route-owner';

/** The error body of every REST route: `{"code", "message"}` (WIRE-PROTOCOL.md 3.6 suggestion). */
export function errorBody(err: EngineError) {
  return { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
}

/**
 * Maps what a REST handler throws to an answer with a code: `EngineError` → its status and code
 * (on a Connect route, `/ironflow.v1.*`, the Connect error shape, e.g. a refused API key);
 * Nest's own HTTP errors (unknown route 404…) keep their status with a code — a 404 on a path
 * another service serves (a worker route on an api-gateway, a client route on a dispatcher) says
 * so in its message; anything else is a 500 `INTERNAL_ERROR` and is logged. `services` are the
 * services this process runs.
 */
@Catch()
export class EngineErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

  constructor(private readonly services: readonly string[]) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    if (isEngineError(err) && host.switchToHttp().getRequest<Request>().path.startsWith('/ironflow.v1.')) {
      const answer = unaryJsonError(err);
      res.status(answer.status).json(answer.body);
      return;
    }
    if (isEngineError(err)) {
      res.status(err.httpStatus).json(errorBody(err));
      return;
    }
    if (err instanceof HttpException) {
      const status = err.getStatus();
      const hint = status === 404 ? wrongServiceHint(host.switchToHttp().getRequest<Request>().path, this.services) : undefined;
      res.status(status).json({ code: status === 404 ? 'NOT_FOUND' : 'HTTP_ERROR', message: hint ? `${err.message}: ${hint}` : err.message });
      return;
    }
    if (err instanceof Error) this.logger.error(err.message, err.stack);
    else this.logger.error(String(err));
    res.status(500).json({ code: 'INTERNAL_ERROR', message: 'internal error' });
  }
}
