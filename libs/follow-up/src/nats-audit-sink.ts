import { randomUUID } from 'node:crypto';
import { NatsBus } from '@ironflow/bus';
import { AuditNotWritten, AuditSink, AuditWriteOptions, ScopedAuditRow } from './audit-recorder';
import { AuditFates } from './store-audit-fates';

/** Logical subject the audit-writer service answers, one per project and env (on the wire `ifx.{clusterId}.…`, see `BusNamespace`). */
export const auditWriteSubject = (project: string, env: string) => `ironflow.${project}.${env}.audit.write`;
/** What the audit-writer subscribes to (a Nest `@MessagePattern`; `NamespacedNatsServer` namespaces it). */
export const AUDIT_WRITE_PATTERN = 'ironflow.*.*.audit.write';

/** What an audit write request carries: the rows, what is left of their budget (ms) and the request's id (its fate's key). */
export interface AuditWriteRequest {
  rows: ScopedAuditRow[];
  budgetMs: number;
  requestId?: string;
}

/** What a sender learned about a write that got no answer. */
export type UnansweredAuditFate = 'written' | 'given_up' | 'unknown';

/**
 * Sends rows to the audit-writer service as a core NATS request (DESIGN.md "Audit"); the reply is
 * the insert's acknowledgement, and an error reply says the rows were not written. The request
 * carries the rows' budget, within which the writer inserts them or not at all, and the sink waits
 * for the answer that long plus `graceMs` (network and commit), so a row is counted as lost only
 * when the writer said so, or when no answer came at all.
 *
 * No answer (a writer killed after its commit, a lost reply, a writer too slow): with `fates`, the
 * sink settles the request as given up (`AuditFates.giveUp`, waiting at most `graceMs` for a
 * writer's open insert of it). If a writer stored the rows first, the write resolves as written;
 * otherwise no writer will store them and they count as lost. Only when that cannot be told (the
 * store is unreachable too, or a writer's insert is still open after the grace) are they counted
 * without knowing, so a row can then be both stored and counted.
 */
export class NatsAuditSink implements AuditSink {
  /**
   * `onUnanswered` is told, for each write that got no answer, how many rows it held and what the
   * sink learned: `written`, `given_up` (counted as lost) or `unknown` (counted as lost, may be stored).
   */
  constructor(
    private readonly bus: NatsBus,
    private readonly graceMs = 1000,
    private readonly fates?: AuditFates,
    private readonly onUnanswered: (fate: UnansweredAuditFate, rows: number) => void = () => undefined,
  ) {}

  async write(rows: ScopedAuditRow[], options: AuditWriteOptions): Promise<void> {
    if (options.signal.aborted) throw new AuditNotWritten('stopped', 'audit write ended before it was sent (audit recorder stopped)');
    const { project, env } = rows[0];
    // Nest's NATS transport answers only requests in its envelope: `{id, pattern, data}`.
    const requestId = randomUUID();
    const data: AuditWriteRequest = { rows, budgetMs: options.budgetMs, requestId };
    const envelope = { id: requestId, pattern: AUDIT_WRITE_PATTERN, data };
    let reply: { err?: unknown; response?: unknown } | null;
    try {
      reply = (await this.bus.request(auditWriteSubject(project, env), envelope, options.budgetMs + this.graceMs)) as typeof reply;
    } catch (err) {
      const message = String(err);
      // No audit-writer listens: nothing was written.
      if (/no responders|503/i.test(message)) throw new AuditNotWritten('error', `no audit-writer answers: ${message}`);
      if (!this.fates) {
        this.onUnanswered('unknown', rows.length);
        throw new Error(`audit-writer did not answer: ${message}`);
      }
      let lost: boolean;
      try {
        lost = await this.fates.giveUp(requestId, this.graceMs);
      } catch (settleErr) {
        this.onUnanswered('unknown', rows.length);
        throw new Error(`audit-writer did not answer (${message}) and whether it wrote the rows is unknown: ${String(settleErr)}`);
      }
      this.onUnanswered(lost ? 'given_up' : 'written', rows.length);
      if (!lost) return; // a writer stored them; its answer was lost
      throw new AuditNotWritten('budget', `audit-writer did not answer within the budget; the rows were given up before any insert: ${message}`);
    }
    if (!reply || (reply.err !== undefined && reply.err !== null)) {
      const err = reply?.err as { reason?: string; message?: string } | string | undefined;
      const reason = typeof err === 'object' && err && (err.reason === 'budget' || err.reason === 'stopped') ? err.reason : 'error';
      throw new AuditNotWritten(reason, `audit-writer did not write the rows: ${JSON.stringify(err ?? reply)}`);
    }
  }
}
