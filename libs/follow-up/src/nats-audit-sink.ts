import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pRetry, { AbortError } from 'p-retry';
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

/**
 * How a request that no audit-writer answered (NATS no responders) is sent again: after 50 ms,
 * doubling to at most 500 ms, each wait drawn between 1x and 2x (jitter) and cut to the budget
 * left (p-retry's `minTimeout`, `factor`, `maxTimeout`, `randomize`).
 */
export const AUDIT_NO_RESPONDERS_BACKOFF = { minTimeout: 50, factor: 2, maxTimeout: 500, randomize: true } as const;

/** No audit-writer listens on the subject: nothing reached a writer, so sending again cannot store a row twice. */
class NoAuditWriter extends Error {
  override name = 'NoAuditWriter';
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
 * No responders (no audit-writer subscribed, e.g. while one restarts): nothing reached a writer,
 * so the sink sends the request again with backoff ({@link AUDIT_NO_RESPONDERS_BACKOFF}, with
 * p-retry) for as long as the rows' budget lasts, each time carrying the budget left, and never
 * waits past it. When the budget runs out with no writer the rows are not written
 * (`AuditNotWritten` `budget`, "no audit-writer answered within the budget"); when
 * `options.signal` aborts during a wait it stops at once (`AuditNotWritten` `stopped`). A request
 * that reached a writer (an answer, an error reply, a timeout) is never sent again.
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
   * `onRetry` is told each time a request no audit-writer answered is sent again
   * (`ironflow_audit_write_retries_total`).
   */
  constructor(
    private readonly bus: NatsBus,
    private readonly graceMs = 1000,
    private readonly fates?: AuditFates,
    private readonly onUnanswered: (fate: UnansweredAuditFate, rows: number) => void = () => undefined,
    private readonly onRetry: () => void = () => undefined,
  ) {}

  /**
   * Sends `rows` (all of one project and env) within `options.budgetMs` (ms). Resolves when the
   * writer stored them; rejects with `AuditNotWritten` (`budget`, `stopped`, `error`) when they
   * were not written, or with a plain `Error` when no answer came and whether they were stored is
   * unknown (see the class).
   */
  async write(rows: ScopedAuditRow[], options: AuditWriteOptions): Promise<void> {
    if (options.signal.aborted) throw new AuditNotWritten('stopped', 'audit write ended before it was sent (audit recorder stopped)');
    const { project, env } = rows[0];
    const subject = auditWriteSubject(project, env);
    // Nest's NATS transport answers only requests in its envelope: `{id, pattern, data}`. One id
    // for every try: only a try no writer heard is sent again, so at most one writer has it.
    const requestId = randomUUID();
    const start = performance.now();
    let sent = 0;
    let answered: { reply: { err?: unknown; response?: unknown } | null } | undefined;
    // p-retry listens on the recorder's signal only while it waits to try again, one listener per
    // write (the recorder allows one per slot). Not `AbortSignal.any`: on Node 20 each one stays
    // reachable from the recorder's long-lived signal (about 1 KB per write, never freed).
    const signal = options.signal;
    try {
      await pRetry(async () => {
        const budgetMs = Math.floor(options.budgetMs - (performance.now() - start));
        if (budgetMs <= 0) throw new NoAuditWriter('no budget left for another try');
        const data: AuditWriteRequest = { rows, budgetMs, requestId };
        sent += 1;
        if (sent > 1) this.onRetry();
        try {
          const reply = (await this.bus.request(subject, { id: requestId, pattern: AUDIT_WRITE_PATTERN, data }, budgetMs + this.graceMs)) as { err?: unknown; response?: unknown } | null;
          // Kept here: p-retry rejects a try that resolved once the signal aborted, and these rows were answered.
          answered = { reply };
        } catch (err) {
          if (/no responders|503/i.test(String(err))) throw new NoAuditWriter(String(err));
          // It may have reached a writer: never sent again, settled below.
          throw new AbortError(err instanceof Error ? err : new Error(String(err)));
        }
      }, {
        ...AUDIT_NO_RESPONDERS_BACKOFF,
        retries: Number.POSITIVE_INFINITY,
        maxRetryTime: options.budgetMs,
        signal,
        shouldRetry: ({ error }) => error instanceof NoAuditWriter,
      });
    } catch (err) {
      if (!answered) {
        if (err instanceof NoAuditWriter) {
          throw new AuditNotWritten('budget', `no audit-writer answered within the budget (${options.budgetMs} ms; ${sent} requests, each with no responders)`);
        }
        if (signal.aborted && err === signal.reason) {
          throw new AuditNotWritten('stopped', `audit write ended while waiting for an audit-writer to answer (audit recorder stopped; ${sent} requests, each with no responders)`);
        }
        return this.unanswered(err, requestId, rows.length);
      }
    }
    const reply = answered?.reply;
    if (!reply || (reply.err !== undefined && reply.err !== null)) {
      const err = reply?.err as { reason?: string; message?: string } | string | undefined;
      const reason = typeof err === 'object' && err && (err.reason === 'budget' || err.reason === 'stopped') ? err.reason : 'error';
      throw new AuditNotWritten(reason, `audit-writer did not write the rows: ${JSON.stringify(err ?? reply)}`);
    }
  }

  /**
   * A request that may have reached a writer got no answer (or could not be sent): settles its
   * fate as the class says. Returns when a writer stored the rows; throws otherwise.
   */
  private async unanswered(err: unknown, requestId: string, rows: number): Promise<void> {
    const message = String(err);
    if (!this.fates) {
      this.onUnanswered('unknown', rows);
      throw new Error(`audit-writer did not answer: ${message}`);
    }
    let lost: boolean;
    try {
      lost = await this.fates.giveUp(requestId, this.graceMs);
    } catch (settleErr) {
      this.onUnanswered('unknown', rows);
      throw new Error(`audit-writer did not answer (${message}) and whether it wrote the rows is unknown: ${String(settleErr)}`);
    }
    this.onUnanswered(lost ? 'given_up' : 'written', rows);
    if (!lost) return; // a writer stored them; its answer was lost
    throw new AuditNotWritten('budget', `audit-writer did not answer within the budget; the rows were given up before any insert: ${message}`);
  }
}
