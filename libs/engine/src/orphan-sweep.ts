import { invokesSql, runsSql } from '@ironflow/store';
import { AdmissionOutcome, InvokeAdmission } from './invoke-admission';
import { LapCursor } from './lap-cursor';
import { EngineResources } from './resources';

/**
 * The orphan sweep (DESIGN.md `scheduler`; specification, "Outcomes nobody announces"), run every
 * tick: runs still held for their admission at least `admissionGraceMs` after their creation,
 * whose admission a crash, a store error or a full slot set interrupted. It goes through them a
 * page a tick, in laps (`LapCursor`), one at a time on its loop, without waiting for whoever began
 * the admission: a child its parent's step still links, and a triggered run of a function with
 * `cancelOn`, is re-admitted (its `cancel_on` replay reads the event log first, then the second
 * read and the dispatch; a triggered run's `run.created` row goes first, a child's not, and a row
 * its cut-off admission already wrote stays the only one, as the store skips a second); a child no
 * parent waits on any more is cancelled quietly
 * (`invoke-link-failed`, `invoke-result-won`, `parent-ended`) with an `updated` run event. A run
 * whose replay fails stays held, and the sweep pages past it and comes back to it next lap.
 */
export class OrphanSweep {
  private readonly cursor = new LapCursor();

  constructor(private readonly r: EngineResources, private readonly admissions: InvokeAdmission) {}

  /** One page; stops once `signal` aborts. Returns each run's outcome, by run id. */
  async run(signal?: AbortSignal): Promise<Map<string, AdmissionOutcome>> {
    const page = await this.cursor.next(
      this.r.clock.now(),
      this.r.config.admissionGraceMs,
      this.r.config.passPageSize,
      (upTo, after, limit) => this.r.store.read('pageHeldRuns', (tx) => runsSql.pageHeldRuns(tx, upTo, after, limit)),
      (run) => ({ createdAt: run.createdAt, id: run.id }),
    );
    const outcomes = new Map<string, AdmissionOutcome>();
    for (const run of page) {
      if (signal?.aborted) break;
      try {
        const invoke = run.parentRunId && run.parentStepId
          ? await this.r.store.read('getInvoke', (tx) => invokesSql.getInvoke(tx, run.parentRunId!, run.parentStepId!))
          : null;
        outcomes.set(run.id, await this.admissions.admit({ run, invoke }, 'sweep'));
      } catch (err) {
        this.r.logger.warn('orphan sweep: could not read a held run\'s invocation; the next lap tries again', { run_id: run.id, error: String(err) });
        outcomes.set(run.id, 'failed');
      }
    }
    return outcomes;
  }
}
