import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { EngineError } from '@ironflow/contracts';
import { unaryJsonError } from '@ironflow/rpc';

/**
 * Reads every body raw (a Buffer on `req.body`) up to `limit` bytes, so each route parses JSON
 * itself with a coded error. An oversized body is answered `PAYLOAD_TOO_LARGE`: 413 `{code, message}` on
 * REST routes, the Connect error (429 `resource_exhausted`, `ironflowCode`) on `/ironflow.v1.*`; nothing
 * reaches a handler. `onTooLarge` runs first (awaited, its errors ignored): what an oversized
 * request must still cause, e.g. failing the attempt of a job whose report was too large.
 */
export function rawBodyMiddleware(limit: number, onTooLarge?: (req: Request) => Promise<unknown>) {
  const parse = express.raw({ type: () => true, limit });
  return (req: Request, res: Response, next: NextFunction) =>
    parse(req, res, async (err?: unknown) => {
      if (!err) return next();
      const e = err as { type?: string; status?: number; message?: string };
      if (e.type === 'entity.too.large') {
        await onTooLarge?.(req).catch(() => undefined);
        const error = new EngineError('PAYLOAD_TOO_LARGE', `request body is over the ${limit} byte limit`);
        // Connect routes answer the Connect error shape; REST routes `{code, message}`.
        const answer = req.path.startsWith('/ironflow.v1.') ? unaryJsonError(error) : { status: error.httpStatus, body: { code: error.code, message: error.message } };
        res.status(answer.status).json(answer.body);
        return;
      }
      res.status(e.status ?? 400).json({ code: 'INVALID_REQUEST', message: e.message ?? 'unreadable request body' });
    });
}
