import { Body, Controller, Get, Inject, Param, Post, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import { EngineError, RegisterFunctionInput, RunStatus } from '@ironflow/contracts';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { parseJsonBody } from '../http/json-body';
import { refuseUnknownKeys } from '../http/refuse-unknown-keys';
import { scopeOf } from '../http/scope';

/**
 * REST routes of the client API (WIRE-PROTOCOL.md 5.6): functions, events, runs. Bodies are JSON;
 * errors are `{"code","message"}` with the code's HTTP status. A query parameter a route does not
 * read (every one, on the routes other than the two lists), and an empty one, is `VALIDATION_ERROR` naming it.
 */
@Controller('api/v1')
export class RestController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  /** → `{functions: Function[]}` */
  @Get('functions')
  async listFunctions(@Req() req: Request, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    return { functions: await this.runtime.engine.api.listFunctions(scopeOf(req)) };
  }

  /** Body: a function definition (`id`, `mode`, `endpointUrl`, `triggers`, `retry`…) → `{function, created}`. */
  @Post('functions')
  async registerFunction(@Req() req: Request, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    return this.runtime.engine.api.registerFunction(scopeOf(req), parseJsonBody<RegisterFunctionInput>(body));
  }

  /** Body: `{name, data, idempotencyKey?, version?, metadata?}` → `{eventId, runIds}`; any other key → `VALIDATION_ERROR` naming it. */
  @Post('events')
  async emit(@Req() req: Request, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    const input = parseJsonBody<{ name?: unknown; data?: unknown; idempotencyKey?: unknown; idempotency_key?: unknown; version?: unknown; metadata?: unknown }>(body);
    refuseUnknownKeys('unknown field(s)', input, EMIT_FIELDS);
    // Checked here, not only by the engine, whose message names Trigger's field (`event`).
    if (typeof input.name !== 'string' || input.name.trim() === '') throw new EngineError('VALIDATION_ERROR', 'name: the event name is required (a non-empty string)');
    if (input.data !== undefined && (input.data === null || typeof input.data !== 'object' || Array.isArray(input.data))) {
      throw new EngineError('VALIDATION_ERROR', 'data: a JSON object (as Trigger takes it)');
    }
    const key = eitherName(input, 'idempotencyKey', 'idempotency_key');
    if (key !== undefined && typeof key !== 'string') throw new EngineError('VALIDATION_ERROR', 'idempotencyKey: a string');
    return this.runtime.engine.api.trigger(scopeOf(req), {
      event: input.name,
      data: input.data ?? {},
      // The engine refuses an empty key (it is not "no key").
      ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
      // The engine validates both (an integer ≥ 1; a JSON object).
      ...(input.version !== undefined ? { version: input.version as number } : {}),
      ...(input.metadata !== undefined ? { metadata: input.metadata as Record<string, unknown> } : {}),
    });
  }

  /**
   * The event log, newest first. Query: `name` (exact), `limit` (1–500, default 50), `cursor` (a
   * previous `nextCursor`) → `{events: [{id, name, data, idempotencyKey?, ts}], nextCursor}`
   * (`nextCursor` `""` on the last page). A bad cursor or limit, or another parameter → 400 `VALIDATION_ERROR`.
   */
  @Get('events')
  async listEvents(@Req() req: Request, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, ['name', 'limit', 'cursor']);
    return this.runtime.engine.api.listEvents(scopeOf(req), { name: queryParam(q, 'name'), limit: limitParam(q), cursor: queryParam(q, 'cursor') });
  }

  /**
   * Query: `functionId`, `status` (lowercase), `limit` (≥ 1, default 50, at most 500 a page), `cursor` → `{runs, nextCursor, totalCount}`.
   * A bad limit or another parameter → 400 `VALIDATION_ERROR`.
   */
  @Get('runs')
  async listRuns(@Req() req: Request, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, ['functionId', 'status', 'limit', 'cursor']);
    return this.runtime.engine.api.listRuns(scopeOf(req), {
      functionId: queryParam(q, 'functionId'),
      status: queryParam(q, 'status') as RunStatus | undefined,
      limit: limitParam(q),
      cursor: queryParam(q, 'cursor'),
    });
  }

  @Get('runs/:id')
  async getRun(@Req() req: Request, @Param('id') id: string, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    return this.runtime.engine.api.getRun(scopeOf(req), id);
  }

  /** Body: `{run_id, from_step?}` (WIRE-PROTOCOL.md 5.6) → the run. Resumes a paused run; `from_step` and any other key are refused. */
  @Post('runs/resume')
  async resumeRun(@Req() req: Request, @Body() body: Buffer, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    const input = parseJsonBody<{ run_id?: unknown; runId?: unknown; from_step?: unknown; fromStep?: unknown }>(body);
    refuseUnknownKeys('unknown field(s)', input, ['run_id', 'runId', 'from_step', 'fromStep']);
    const runId = eitherName(input, 'run_id', 'runId');
    const fromStep = eitherName(input, 'from_step', 'fromStep');
    if (typeof runId !== 'string') throw new EngineError('VALIDATION_ERROR', 'run_id: a run id is required');
    if (fromStep !== undefined && typeof fromStep !== 'string') throw new EngineError('VALIDATION_ERROR', 'from_step: a string');
    return this.runtime.engine.api.resumeRun(scopeOf(req), runId, fromStep || undefined);
  }

  /** → `{steps, history, children}` */
  @Get('runs/:id/steps')
  async getRunSteps(@Req() req: Request, @Param('id') id: string, @Query() q: Record<string, unknown>) {
    refuseUnknownKeys('unknown query parameter(s)', q, []);
    return this.runtime.engine.api.getRunSteps(scopeOf(req), id);
  }
}

/**
 * One query parameter as a string; given twice (`?name=a&name=b`), as an object, or empty
 * (`?functionId=`, which is not "no filter": leave the parameter out) → `VALIDATION_ERROR` naming it.
 */
function queryParam(q: Record<string, unknown>, key: string): string | undefined {
  const value = q[key];
  if (value === '') throw new EngineError('VALIDATION_ERROR', `${key}: an empty value (leave the parameter out instead)`);
  if (value === undefined || typeof value === 'string') return value;
  throw new EngineError('VALIDATION_ERROR', `${key}: one value is expected`);
}

/**
 * A body key the route takes under two names (`idempotencyKey` / `idempotency_key`): the one given,
 * or `VALIDATION_ERROR` naming both when both are given with different values (one would be dropped).
 */
function eitherName(input: Record<string, unknown>, first: string, second: string): unknown {
  const [a, b] = [input[first], input[second]];
  if (a !== undefined && b !== undefined && JSON.stringify(a) !== JSON.stringify(b)) {
    throw new EngineError('VALIDATION_ERROR', `${first} and ${second}: two values for one key (${JSON.stringify(a)}, ${JSON.stringify(b)}): give one`);
  }
  return a ?? b;
}

/** The keys `POST /api/v1/events` acts on (WIRE-PROTOCOL.md 5.6, plus `version` and `metadata`). */
const EMIT_FIELDS = ['name', 'data', 'idempotencyKey', 'idempotency_key', 'version', 'metadata'];

/** The `limit` query parameter: absent, or a whole number ≥ 1 (`VALIDATION_ERROR` otherwise; the engine caps a page at 500). */
function limitParam(q: Record<string, unknown>): number | undefined {
  const raw = queryParam(q, 'limit');
  if (raw === undefined) return undefined;
  const limit = Number(raw);
  if (!/^\d+$/.test(raw) || limit < 1) throw new EngineError('VALIDATION_ERROR', `limit: a whole number of at least 1 (a page holds at most 500), not ${JSON.stringify(raw)}`);
  return limit;
}
