import { Body, Controller, Get, HttpCode, Inject, Post } from '@nestjs/common';
import { EngineError } from '@ironflow/contracts';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';
import { AdminRoute } from '../http/api-key.guard';
import { parseJsonBody } from '../http/json-body';

/**
 * Freeze and thaw of the instance authority (specification, "A freeze, thaw, reconcile or attest
 * holds the instance authority row"; `ironflow instance freeze/thaw/status`; README "Freezing an
 * instance"). Admin routes, guarded like API key management: the admin key (`IRONFLOW_ADMIN_KEY`)
 * as `Authorization: Bearer` when one is configured. A transition that cannot get its locks in
 * 500 ms answers `UNAVAILABLE` (503) and changes nothing: send it again.
 */
@AdminRoute()
@Controller('api/v1/instance')
export class InstanceController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  /** → `InstanceStatusView`: state, since, by, reason and the work held. */
  @Get()
  async status() {
    return this.runtime.engine.instance.status();
  }

  /** Body `{reason?}` → `{changed, status}`; freezing a frozen instance changes nothing. */
  @Post('freeze')
  @HttpCode(200)
  async freeze(@Body() body: Buffer) {
    return this.runtime.engine.instance.freeze(this.runtime.engine.apiKeys.adminActor, reasonOf(body));
  }

  /** Body `{reason?}` → `{changed, status}`; thawing a thawed instance changes nothing. */
  @Post('thaw')
  @HttpCode(200)
  async thaw(@Body() body: Buffer) {
    return this.runtime.engine.instance.thaw(this.runtime.engine.apiKeys.adminActor, reasonOf(body));
  }
}

/** The optional `reason` of a transition's body; any other key is refused with `VALIDATION_ERROR` naming it. */
function reasonOf(body: Buffer): string | null {
  const input = parseJsonBody<Record<string, unknown>>(body);
  const unknown = Object.keys(input).filter((k) => k !== 'reason');
  if (unknown.length) throw new EngineError('VALIDATION_ERROR', `unknown field(s): ${unknown.join(', ')} (a freeze or thaw takes only "reason")`);
  if (input.reason !== undefined && input.reason !== null && typeof input.reason !== 'string') throw new EngineError('VALIDATION_ERROR', 'reason: a string');
  return typeof input.reason === 'string' && input.reason !== '' ? input.reason : null;
}
