import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Put, Req } from '@nestjs/common';
import type { Request } from 'express';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { parseJsonBody } from '../http/json-body';
import { scopeOf } from '../http/scope';

/**
 * Secrets of the call's project and env (issue 9, item 4; `ironflow secret set/list/delete`).
 * Values go in and never come out: listings show names and times. Errors: `VALIDATION_ERROR`
 * (400), `SECRET_NOT_FOUND` (404), `SECRETS_NOT_CONFIGURED` (503, no `IRONFLOW_SECRETS_KEY`).
 */
@Controller('api/v1/secrets')
export class SecretsController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  /** → `{secrets: [{name, createdAt, updatedAt}]}` */
  @Get()
  async list(@Req() req: Request) {
    return { secrets: await this.runtime.engine.secrets.list(scopeOf(req)) };
  }

  /** Body `{value}` → `{secret: {name, createdAt, updatedAt}}`; creates or replaces. */
  @Put(':name')
  async set(@Req() req: Request, @Param('name') name: string, @Body() body: Buffer) {
    const { value } = parseJsonBody<{ value?: unknown }>(body);
    return { secret: await this.runtime.engine.secrets.set(scopeOf(req), name, value) };
  }

  @Delete(':name')
  @HttpCode(200)
  async delete(@Req() req: Request, @Param('name') name: string) {
    await this.runtime.engine.secrets.delete(scopeOf(req), name);
    return { deleted: name };
  }
}
