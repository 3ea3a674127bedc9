import { Store, auditSql, unitWithLockLimit } from '@ironflow/store';

/**
 * Where a sender settles an audit write request it heard no answer to (DESIGN.md "Audit";
 * `audit_write_fates`, see `AuditWriter`).
 */
export interface AuditFates {
  /**
   * Settles `requestId` as given up, waiting at most `waitMs` for a writer's open insert of it.
   * Resolves `true` when the rows were not written and now never will be, `false` when a writer
   * stored them; rejects when it cannot tell (the store is unreachable, or a writer's insert is
   * still open after `waitMs`).
   */
  giveUp(requestId: string, waitMs: number): Promise<boolean>;
}

/** {@link AuditFates} on the store the audit-writer writes to (every service has it). */
export class StoreAuditFates implements AuditFates {
  constructor(private readonly store: Store) {}

  async giveUp(requestId: string, waitMs: number): Promise<boolean> {
    const settled = await unitWithLockLimit(this.store, 'giveUpAuditWrite', waitMs, (tx) => auditSql.settleAuditRequests(tx, [requestId], 'given_up'));
    return settled.length === 1;
  }
}
