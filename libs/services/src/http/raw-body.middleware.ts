import express from 'express';
import type { NextFunction, Request, Response } from 'express';

/**
 * Reads every body raw (a Buffer on `req.body`) up to `limit` bytes, so each route parses JSON
 * itself with a coded error. An oversized body is answered `413 PAYLOAD_TOO_LARGE`; nothing
 * reaches a handler.
 */
export function rawBodyMiddleware(limit: number) {
  const parse = express.raw({ type: () => true, limit });
  return (req: Request, res: Response, next: NextFunction) =>
    parse(req, res, (err?: unknown) => {
      if (!err) return next();
      const e = err as { type?: string; status?: number; message?: string };
      if (e.type === 'entity.too.large') {
        res.status(413).json({ code: 'PAYLOAD_TOO_LARGE', message: `request body is over the ${limit} byte limit` });
        return;
      }
      res.status(e.status ?? 400).json({ code: 'INVALID_REQUEST', message: e.message ?? 'unreadable request body' });
    });
}
