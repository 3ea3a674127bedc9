import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { AUDIT_WRITE_PATTERN, AuditNotWritten, AuditWriteRequest, ScopedAuditRow } from '@ironflow/follow-up';
import { EngineRuntime } from '../runtime/engine-runtime';
import { ENGINE_RUNTIME } from '../runtime/tokens';

/**
 * Answers audit writes sent as NATS requests on `ifx.{clusterId}.ironflow.{project}.{env}.audit.write`
 * (queue group `{clusterId}-audit-writer`, so only this deployment's writers answer)
 * (DESIGN.md "Audit"): the rows that arrive together go into one insert, in a bounded slot,
 * within the budget the request carries, and the reply `{written}` acknowledges it. Rows not
 * written reply with an error `{reason, message}` (`budget`, `stopped` or `error`), so the sender
 * counts them as lost, and only them. The insert settles the request's `requestId` as written, so
 * a sender that hears no answer can still learn the rows were stored (`NatsAuditSink`).
 */
@Controller()
export class AuditWriterController {
  constructor(@Inject(ENGINE_RUNTIME) private readonly runtime: EngineRuntime) {}

  @MessagePattern(AUDIT_WRITE_PATTERN)
  async write(@Payload() request: AuditWriteRequest | ScopedAuditRow[]): Promise<{ written: number }> {
    const rows = Array.isArray(request) ? request : request?.rows;
    const budgetMs = !Array.isArray(request) && typeof request?.budgetMs === 'number' ? request.budgetMs : undefined;
    const requestId = !Array.isArray(request) && typeof request?.requestId === 'string' ? request.requestId : undefined;
    const valid = Array.isArray(rows) ? rows.filter((r) => r && typeof r.eventType === 'string') : [];
    try {
      await this.runtime.auditWriter.write(valid, { budgetMs, requestId });
    } catch (err) {
      throw new RpcException({ reason: err instanceof AuditNotWritten ? err.reason : 'error', message: err instanceof Error ? err.message : String(err) });
    }
    return { written: valid.length };
  }
}
