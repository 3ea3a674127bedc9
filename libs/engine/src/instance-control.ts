import { EngineError, InstanceStatusView, InstanceTransitionView } from '@ironflow/contracts';
import { AuthorityRecord, AuthorityState, HeldWork, Tx, auditSql, authoritySql } from '@ironflow/store';
import { EngineResources } from './resources';

/**
 * Freeze and thaw of the instance authority (specification, "A freeze, thaw, reconcile or attest
 * holds the instance authority row"; README "Freezing an instance"). A frozen instance admits no
 * new work: no queued segment is claimed, no held run or invoked child is admitted, no sleep wakes,
 * no parent resumes, no timeout ends a wait and no lease is recovered; each of these reads the
 * authority row under a shared lock (`assertThawed`, `isFrozen`) and changes nothing, so its work
 * stays pending and lands after the thaw. Reports of attempts in flight still commit their
 * outcomes, and events are still accepted.
 *
 * A transition holds the authority row for its unit of work, writes the row and its audit row
 * (`instance.frozen` / `instance.thawed`) in that unit, and on PostgreSQL waits at most
 * `authorityLockTimeoutMs` (500 ms) for each lock it needs (the row, `audit_events`). Past that it
 * rolls back, changes nothing, frees the row and throws `UNAVAILABLE`: send it again once the
 * table is free. The audit row is written in the transition's own unit of work, not through the
 * `AuditRecorder`, because it must commit or roll back with the transition.
 */
export class InstanceControl {
  constructor(private readonly r: EngineResources) {}

  /** Freezes the instance; `by` is who asks, `reason` is kept with the state. Throws `UNAVAILABLE` past the lock limit. */
  freeze(by: string | null, reason: string | null = null): Promise<InstanceTransitionView> {
    return this.transition('frozen', by, reason);
  }

  /** Thaws the instance; the work held lands on the passes' next ticks. Throws `UNAVAILABLE` past the lock limit. */
  thaw(by: string | null, reason: string | null = null): Promise<InstanceTransitionView> {
    return this.transition('thawed', by, reason);
  }

  /** The authority's state and the work waiting for admission (a read; takes no lock). */
  async status(): Promise<InstanceStatusView> {
    return this.r.store.read('instanceStatus', async (tx) => statusOf(await authoritySql.readAuthority(tx), await authoritySql.countHeldWork(tx)));
  }

  private async transition(to: AuthorityState, by: string | null, reason: string | null): Promise<InstanceTransitionView> {
    if (reason !== null && reason.length > 500) throw new EngineError('VALIDATION_ERROR', 'reason: at most 500 characters');
    let written: AuthorityRecord | null;
    try {
      written = await this.r.store.unitOfWork(to === 'frozen' ? 'freezeInstance' : 'thawInstance', async (tx) => {
        await tx.setLockTimeout(this.r.config.authorityLockTimeoutMs);
        const row = await authoritySql.transitionAuthority(tx, to, by, reason);
        if (!row) return null;
        await auditSql.insertAudit(tx, {
          runId: null,
          functionId: null,
          eventType: to === 'frozen' ? 'instance.frozen' : 'instance.thawed',
          cause: reason ?? undefined,
          data: { by, version: row.version },
        });
        return row;
      });
    } catch (err) {
      if (isLockTimeout(err)) {
        throw new EngineError('UNAVAILABLE', `the ${to === 'frozen' ? 'freeze' : 'thaw'} gave up on a lock after ${this.r.config.authorityLockTimeoutMs} ms (the instance authority row or audit_events is held) and changed nothing; send it again`);
      }
      throw err;
    }
    if (written) this.r.logger.log(`instance ${to}`, { by, reason, version: written.version });
    return { changed: written !== null, status: await this.status() };
  }
}

/**
 * In a unit of work that admits work: throws `UNAVAILABLE` (nothing written; the caller's unit
 * rolls back and its work stays pending) when the instance is frozen. Waits for an open freeze or
 * thaw within the unit's lock limit.
 */
export async function assertThawed(tx: Tx): Promise<void> {
  if (await authoritySql.isFrozen(tx)) throw new InstanceFrozen();
}

/** The instance is frozen: the work stays pending until the thaw (retryable). */
export class InstanceFrozen extends EngineError {
  constructor() {
    super('UNAVAILABLE', 'the instance is frozen: new work waits for the thaw');
  }
}

/** A PostgreSQL lock wait that reached `lock_timeout` (SQLSTATE 55P03). */
export function isLockTimeout(err: unknown): boolean {
  const e = err as { driverError?: { code?: unknown }; code?: unknown } | null;
  return (e?.driverError?.code ?? e?.code) === '55P03';
}

function statusOf(row: AuthorityRecord, held: HeldWork): InstanceStatusView {
  return {
    state: row.state,
    version: row.version,
    since: row.changedAt === null ? null : new Date(row.changedAt).toISOString(),
    by: row.changedBy,
    reason: row.reason,
    held: { ...held, total: held.queued + held.admissions + held.sleeps + held.wakes },
  };
}
