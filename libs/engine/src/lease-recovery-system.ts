import { runFields } from '@ironflow/observability';
import { RUN_ERROR_CODES } from '@ironflow/contracts';
import { commitOutcome } from '@ironflow/outcome';
import { RunRecord, authoritySql, leaseRecoverySql, leasesSql, runsSql, unitWithLockLimit } from '@ironflow/store';
import { DispatchHints } from './dispatch-hints';
import { OutcomeAnnouncer } from './outcome-announcer';
import { EngineResources } from './resources';
import { announceParked } from './pause-announcer';

/** What one expired lease came to. */
export type RecoveryEffect = 'requeued' | 'exhausted' | 'released' | 'none';

/**
 * Lease expiry and recovery (DESIGN.md `capacity-scanner`): an execution whose lease expired is
 * queued again with the same attempt; the `recoveryCeiling + 1`-th consecutive recovery (the 11th
 * by default) fails the run with `EXECUTION_RECOVERY_EXHAUSTED`, announced like any failure. A
 * lease left by a run that already ended (a crash between its outcome and the release) or by an
 * execution that is no longer live is deleted, freeing the slot without running anything again.
 * Each lease is its own unit of work under the lock limit (`lockLimitMs` on PostgreSQL), so one bad
 * or locked row costs only itself and the next scan retries it.
 */
export class LeaseRecoverySystem {
  constructor(
    private readonly r: EngineResources,
    private readonly announcer: OutcomeAnnouncer,
    private readonly hints: DispatchHints,
  ) {}

  /**
   * One scan: recovers up to a page of expired leases. Returns each lease's effect. During a freeze
   * it changes nothing and stops at the first lease (returning the effects before it).
   */
  async scan(): Promise<RecoveryEffect[]> {
    const expired = await this.r.store.read('listExpiredLeases', (tx) => leaseRecoverySql.listExpiredLeases(tx, this.r.config.passPageSize));
    const effects: RecoveryEffect[] = [];
    for (const lease of expired) {
      try {
        const effect = await this.recover(lease.runId, lease.executionSeq);
        if (effect === 'frozen') break;
        effects.push(effect);
      } catch (err) {
        this.r.logger.warn('lease recovery failed; the next scan tries again', { ...runFields({ id: lease.runId, executionSeq: lease.executionSeq }), error: String(err) });
        effects.push('none');
      }
    }
    return effects;
  }

  /**
   * For a store this process holds alone (`OpenedStore.exclusive`: `ironflow dev` on SQLite), at
   * start, before any loop runs: no other live process can hold a lease there, so every push lease
   * found was left by an engine that is gone (killed, crashed). Expires them all in one statement
   * (`leaseRecoverySql.expirePushLeases`), so the capacity scanner's first scan recovers their
   * executions through {@link scan} — recovery count, ceiling, fencing, events and audit rows as for
   * any expired lease — instead of after their full lease (`leaseMs`). Leases of pull and stream
   * jobs are kept: their worker is a process of its own that may have outlived the engine and goes
   * on heartbeating (a stream worker's jobs are adopted when it reconnects and lists them);
   * expiring them would start a second execution while the first still runs. (Our SDK's stream
   * worker stops a broken stream's jobs without a report, so those wait for their lease; the
   * store does not record which transport holds a lease.) Logs a warning with how many executions
   * it expired (none: no line) and returns that number. Never call it on a shared store: it would
   * expire the live leases of other nodes.
   */
  async expireLeftoverPushLeases(): Promise<number> {
    const expired = await this.r.store.unitOfWork('expirePushLeases', (tx) => leaseRecoverySql.expirePushLeases(tx));
    if (expired > 0) this.r.logger.warn(`${expired} push execution(s) left running by a process that is gone: their leases expired at start, the capacity scanner recovers them`, { count: expired });
    return expired;
  }

  private async recover(runId: string, executionSeq: number): Promise<RecoveryEffect | 'frozen'> {
    const result = await unitWithLockLimit(this.r.store, 'recoverLease', this.r.config.lockLimitMs, async (tx) => {
      // During a freeze the recovery changes nothing; the lease is recovered after the thaw.
      if (await authoritySql.isFrozen(tx)) return { effect: 'frozen' as const };
      const run = await runsSql.getRun(tx, runId, { lock: true });
      const lease = (await tx.query<{ expires_at: unknown }>(`SELECT expires_at FROM leases WHERE run_id = $1 AND execution_seq = $2`, [runId, executionSeq]))[0];
      if (!lease || Number(lease.expires_at) > tx.now) return { effect: 'none' as const }; // refreshed meanwhile
      if (!run || run.status !== 'running' || run.executionSeq !== executionSeq) {
        await leasesSql.deleteLease(tx, runId, executionSeq);
        return { effect: 'released' as const };
      }
      if (run.recoveries + 1 > this.r.config.recoveryCeiling) {
        const failed = await commitOutcome(tx, runId, {
          status: 'failed',
          error: { message: `execution lost its lease ${run.recoveries + 1} times in a row`, code: RUN_ERROR_CODES.EXECUTION_RECOVERY_EXHAUSTED, retryable: false },
        }, { kind: 'version', status: 'running', version: run.version });
        return failed ? { effect: 'exhausted' as const, run: failed } : { effect: 'none' as const };
      }
      const requeued = await leaseRecoverySql.requeueRecovered(tx, run);
      return requeued ? { effect: 'requeued' as const, run: requeued } : { effect: 'none' as const };
    });
    if (result.effect === 'frozen') return 'frozen';
    if (result.effect !== 'none') this.r.metrics.leaseRecoveries.inc({ effect: result.effect });
    if (result.effect === 'exhausted' && 'run' in result) {
      // Announced from the committed row: a change after the commit (a resume) alters neither the frame nor the event.
      await this.r.pausePoints.reached('recovery.afterCommit', runId);
      void this.announcer.announce(result.run as RunRecord, 'recovery-exhausted');
    }
    if (result.effect === 'requeued' && 'run' in result) {
      const run = result.run as RunRecord;
      if (run.status === 'paused') this.r.followUps.track('paused-audit', () => announceParked(this.r, this.announcer, run, 'lease-recovery'));
      else this.hints.queued(run.project, run.env, run.mode);
      // The scanner's lease audit rows run off its loop, so a stuck audit table cannot stall the sweep.
      this.r.followUps.track('lease-recovered-audit', async () => void (await this.r.audit.record({
        project: run.project,
        env: run.env,
        runId: run.id,
        functionId: run.functionId,
        eventType: 'run.lease_recovered',
        cause: `execution ${executionSeq} lost its lease`,
        data: { execution_seq: executionSeq, recoveries: run.recoveries, attempt: run.attempt },
      })));
    }
    return result.effect;
  }
}
