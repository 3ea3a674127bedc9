import { invokesSql, runsSql } from '@ironflow/store';
import { InvokeAdmission } from './invoke-admission';
import { LapCursor } from './lap-cursor';
import { EngineResources } from './resources';

/**
 * The pending-invocation pass (specification, "A crash after the report's commit loses the rows.
 * The waiting-run pass dispatches the child and resumes the parent"), run with the waiting-run
 * pass. It reads the next page of invocations still pending (`function_invokes.settled_at` NULL,
 * partial index, so it costs in proportion to them) created at least `admissionGraceMs` ago, and
 * starts each one's admission off its loop, as a tracked follow-up that `signal` cannot end: the
 * child's `run.created` row when no admission wrote it (waiting at most `createdRowWaitMs`), its
 * `cancel_on` replay, its second read, its dispatch and a fire-and-forget parent's resume, each
 * giving up on a locked row after `lockLimitMs`. With no slot free an admission waits
 * `admissionSlotWaitMs` and stops; the next lap comes back to it.
 */
export class PendingInvokePass {
  private readonly cursor = new LapCursor();

  constructor(private readonly r: EngineResources, private readonly admissions: InvokeAdmission) {}

  /** One page; stops starting admissions once `signal` aborts. Returns the admissions started. */
  async run(signal?: AbortSignal): Promise<number> {
    const page = await this.cursor.next(
      this.r.clock.now(),
      this.r.config.admissionGraceMs,
      this.r.config.passPageSize,
      (upTo, after, limit) => this.r.store.read('pagePendingInvokes', (tx) => invokesSql.pagePendingInvokes(tx, upTo, after, limit)),
      (row) => ({ createdAt: row.createdAt, id: invokesSql.invokeKey(row) }),
    );
    if (page.length === 0) return 0;
    const children = await this.r.store.read('getPendingChildren', (tx) => runsSql.getRuns(tx, page.map((i) => i.childRunId)));
    const byId = new Map(children.map((c) => [c.id, c]));
    let started = 0;
    for (const invoke of page) {
      if (signal?.aborted) break;
      const child = byId.get(invoke.childRunId);
      if (!child || this.admissions.isInFlight(child.id)) continue;
      started += 1;
      this.r.followUps.track('invoke-admission-pass', () => this.admissions.admit({ run: child, invoke }, 'pass').then(() => undefined));
    }
    return started;
  }
}
