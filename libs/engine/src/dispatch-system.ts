import { randomUUID } from 'node:crypto';
import { InvocationError } from '@ironflow/contracts';
import { leasesSql, runsSql, ClaimFilter, NewLease } from '@ironflow/store';
import { ReportSystem } from './report-system';
import { EngineResources } from './resources';
import { SecretSystem } from './secret-system';
import { Segment, loadSegment } from './segment-loader';

/**
 * Claims queued segments (DESIGN.md "The queue is the runs table"): one unit of work claims up to
 * `limit` runs, bumps each execution and inserts its lease for `holder` (with the execution's
 * deadline, now + the function's `timeoutMs`), and loads what the worker needs, including the
 * values of the secrets its function declares. Claims skip rows another claimer holds, so two
 * dispatchers never run one execution twice.
 *
 * A segment that cannot be delivered (a declared secret is missing or cannot be decrypted) is
 * never handed to a worker: its attempt fails at once with the resolution's code
 * (`SECRET_NOT_FOUND` / `SECRETS_UNAVAILABLE`, retryable), so the run never strands.
 */
export class DispatchSystem {
  constructor(
    private readonly r: EngineResources,
    private readonly secrets: SecretSystem,
    private readonly reports: ReportSystem,
  ) {}

  /** Whether a claim for `filter` would find a queued segment now (`runsSql.hasClaimable`: one read, no lock). Rejects with the store's error. */
  anyClaimable(filter: ClaimFilter): Promise<boolean> {
    return this.r.store.read('hasClaimable', (tx) => runsSql.hasClaimable(tx, filter));
  }

  async claim(filter: ClaimFilter, holder: string): Promise<Segment[]> {
    if (filter.limit <= 0) return [];
    const undeliverable: { segment: Segment; error: InvocationError }[] = [];
    const segments = await this.r.store.unitOfWork('claimSegments', async (tx) => {
      undeliverable.length = 0;
      // A frozen instance claims nothing (claimRuns checks the authority row): queued segments wait for the thaw.
      const runs = await runsSql.claimRuns(tx, filter, () => randomUUID());
      const claimed: Segment[] = [];
      const leases: NewLease[] = [];
      for (const one of runs) {
        const segment = await loadSegment(tx, one);
        const { run } = segment;
        claimed.push(segment);
        // The execution's deadline: the function's timeout from now, on every transport (the capacity scanner enforces it).
        const deadlineAt = segment.definition ? tx.now + segment.definition.timeoutMs : null;
        leases.push({ runId: run.id, executionSeq: run.executionSeq, holder, lane: runsSql.laneOf(run.functionId, run.concurrencyKey), expiresAt: tx.now + this.r.config.leaseMs, deadlineAt });
      }
      // Every claimed execution's lease, in one statement on PostgreSQL, before any secret is resolved.
      await leasesSql.insertLeases(tx, leases);
      const loaded: Segment[] = [];
      for (const segment of claimed) {
        const declared = segment.definition?.secrets ?? [];
        if (declared.length > 0) {
          const resolved = await this.secrets.resolve(tx, segment.run.project, segment.run.env, declared);
          if ('error' in resolved) {
            undeliverable.push({ segment, error: resolved.error });
            continue;
          }
          segment.secrets = resolved.values;
        }
        loaded.push(segment);
      }
      return loaded;
    });
    if (segments.length) this.r.metrics.segmentsDispatched.inc({ mode: filter.mode }, segments.length);
    for (const { segment, error } of undeliverable) await this.failUndelivered(segment, error);
    return segments;
  }

  /**
   * Ends the claimed execution's attempt with `error`; if that report cannot be applied, its lease
   * expires and recovery runs. A failure that ends the run waits for its audit row after its
   * frame (specification, "A stuck store cannot take the pool"), so the claim's failures are
   * written one row at a time.
   */
  private async failUndelivered(segment: Segment, error: InvocationError): Promise<void> {
    const { run } = segment;
    this.r.logger.warn('segment not delivered: its attempt fails', { run_id: run.id, execution_seq: run.executionSeq, function_id: run.functionId, code: error.code });
    await this.reports.apply(run.id, { executionSeq: run.executionSeq, leaseToken: run.leaseToken! }, { kind: 'failed', error }, undefined, { awaitRow: true }).catch((err: unknown) =>
      this.r.logger.warn('undelivered segment failure not applied; its lease expires instead', { run_id: run.id, error: String(err) }),
    );
  }
}
