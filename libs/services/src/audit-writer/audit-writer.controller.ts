import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { AUDIT_WRITE_PATTERN, ScopedAuditRow } from '@ironflow/follow-up';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

/**
 * Answers audit writes sent as NATS requests on `ifx.{clusterId}.ironflow.{project}.{env}.audit.write`
 * (queue group `{clusterId}-audit-writer`, so only this deployment's writers answer)
 * (DESIGN.md "Audit"): the rows that arrive together go into one insert, in a bounded slot, and
 * the reply `{written}` acknowledges it. A failed insert replies with an error.
 */
@Controller()
export class AuditWriterController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  @MessagePattern(AUDIT_WRITE_PATTERN)
  async write(@Payload() rows: ScopedAuditRow[]): Promise<{ written: number }> {
    const valid = Array.isArray(rows) ? rows.filter((r) => r && typeof r.eventType === 'string') : [];
    await this.runtime.auditWriter.write(valid);
    return { written: valid.length };
  }
}
