import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { AdminRoute } from '../http/api-key.guard';
import { parseJsonBody } from '../http/json-body';

/**
 * API key management (issue 9, item 7; `ironflow apikey create/list/revoke`). Admin routes: the
 * admin key (`IRONFLOW_ADMIN_KEY`) as `Authorization: Bearer` when one is configured; without
 * one, anyone while the server is open (no key exists and `IRONFLOW_REQUIRE_API_KEY` is off),
 * which is how `ironflow dev` makes its first key, and nobody once keys are required.
 */
@AdminRoute()
@Controller('api/v1/api-keys')
export class ApiKeysController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  /** Body `{project?, env?, name?}` (default `default`, `default`, "") → `{key, apiKey}`: the key is shown this once. */
  @Post()
  async create(@Body() body: Buffer) {
    const input = parseJsonBody<{ project?: unknown; env?: unknown; name?: unknown }>(body);
    const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
    return this.runtime.engine.apiKeys.create({ project: text(input.project), env: text(input.env), name: text(input.name) });
  }

  /** → `{apiKeys: [{id, prefix, project, env, name, createdAt, revokedAt?}]}`, never a key. */
  @Get()
  async list() {
    return { apiKeys: await this.runtime.engine.apiKeys.list() };
  }

  /** Revokes a key by id (or its `ifk_<id>` prefix) → `{apiKey}`. */
  @Delete(':id')
  @HttpCode(200)
  async revoke(@Param('id') id: string) {
    return { apiKey: await this.runtime.engine.apiKeys.revoke(id) };
  }
}
