import { randomUUID } from 'node:crypto';
import { NatsBus } from '@ironflow/bus';
import { AuditSink, ScopedAuditRow } from './audit-recorder';

/** Logical subject the audit-writer service answers, one per project and env (on the wire `ifx.{clusterId}.…`, see `BusNamespace`). */
export const auditWriteSubject = (project: string, env: string) => `ironflow.${project}.${env}.audit.write`;
/** What the audit-writer subscribes to (a Nest `@MessagePattern`; `NamespacedNatsServer` namespaces it). */
export const AUDIT_WRITE_PATTERN = 'ironflow.*.*.audit.write';

/**
 * Sends rows to the audit-writer service as a core NATS request (DESIGN.md "Audit"); the reply is
 * the insert's acknowledgement. Rejects on a timeout, no responder, or an error reply.
 */
export class NatsAuditSink implements AuditSink {
  constructor(private readonly bus: NatsBus, private readonly timeoutMs = 5000) {}

  async write(rows: ScopedAuditRow[], signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw new Error('audit write ended before it was sent');
    const { project, env } = rows[0];
    // Nest's NATS transport answers only requests in its envelope: `{id, pattern, data}`.
    const envelope = { id: randomUUID(), pattern: AUDIT_WRITE_PATTERN, data: rows };
    const reply = (await this.bus.request(auditWriteSubject(project, env), envelope, this.timeoutMs)) as { err?: unknown; response?: unknown } | null;
    if (!reply || (reply.err !== undefined && reply.err !== null)) throw new Error(`audit-writer refused the rows: ${JSON.stringify(reply?.err ?? reply)}`);
  }
}
