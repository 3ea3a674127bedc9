import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { EngineError, isEngineError } from '@ironflow/contracts';
import { unaryJsonError } from '@ironflow/rpc';

/** The error body of every REST route: `{"code", "message"}` (WIRE-PROTOCOL.md 3.6 suggestion). */
export function errorBody(err: EngineError) {
  return { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
}

/**
 * Maps what a REST handler throws to an answer with a code: `EngineError` → its status and code
 * (on a Connect route, `/ironflow.v1.*`, the Connect error shape, e.g. a refused API key);
 * Nest's own HTTP errors (unknown route 404…) keep their status with a code; anything else is a
 * 500 `INTERNAL_ERROR` and is logged.
 */
@Catch()
export class EngineErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('http');

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
      res.status(status).json({ code: status === 404 ? 'NOT_FOUND' : 'HTTP_ERROR', message: err.message });
      return;
    }
    if (err instanceof Error) this.logger.error(err.message, err.stack);
    else this.logger.error(String(err));
    res.status(500).json({ code: 'INTERNAL_ERROR', message: 'internal error' });
  }
}
