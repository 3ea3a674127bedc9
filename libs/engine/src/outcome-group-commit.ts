import { FencedOutcome, commitFencedOutcomes } from '@ironflow/outcome';
import { RunRecord } from '@ironflow/store';
import { EngineResources } from './resources';

/** Most runs one group commit writes (its statement's arrays). */
const MAX_GROUP = 64;

interface Waiting {
  report: FencedOutcome;
  resolve: (committed: RunRecord | null) => void;
}

/**
 * Group commit of push outcomes (issue 11): reports that end their run share one unit of work
 * (`commitOutcomes`, one statement on PostgreSQL; see `commitFencedOutcomes`). Natural batching:
 * a report that finds no commit in flight starts one at once, alone, so a report at low load waits
 * for nothing; reports that arrive while a commit is in flight wait for it and go together in the
 * next, up to 64 runs, at most one report per run.
 *
 * Each run keeps its own rules: its write is fenced by its own execution and lease token, and a
 * run the group did not commit (its fence no longer holds, it already ended, its row was locked)
 * or a group whose commit failed (every run rolled back) resolves `null`, and the caller applies
 * that report alone, which judges it as usual. So no report is lost or applied twice, and a run's
 * outcome is still one write, final once committed. Never rejects.
 */
export class OutcomeGroupCommit {
  private readonly queue: Waiting[] = [];
  private committing = false;

  constructor(private readonly r: EngineResources) {}

  /** Commits `report` with whatever else is waiting: the committed row, or `null` when the report is the caller's to apply alone. */
  commit(report: FencedOutcome): Promise<RunRecord | null> {
    return new Promise((resolve) => {
      this.queue.push({ report, resolve });
      if (!this.committing) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.committing = true;
    try {
      while (this.queue.length > 0) await this.commitGroup(this.nextGroup());
    } finally {
      this.committing = false;
    }
  }

  /** Takes up to `MAX_GROUP` waiting reports, one per run (a second report of a run waits for the next group). */
  private nextGroup(): Waiting[] {
    const runs = new Set<string>();
    const group: Waiting[] = [];
    for (let i = 0; i < this.queue.length && group.length < MAX_GROUP; ) {
      const waiting = this.queue[i];
      if (runs.has(waiting.report.runId)) {
        i += 1;
        continue;
      }
      runs.add(waiting.report.runId);
      group.push(waiting);
      this.queue.splice(i, 1);
    }
    return group;
  }

  private async commitGroup(group: Waiting[]): Promise<void> {
    let committed = new Map<string, RunRecord>();
    try {
      committed = await this.r.store.unitOfWork('commitOutcomes', (tx) => commitFencedOutcomes(tx, group.map((w) => w.report)), { oneStatement: true });
    } catch (err) {
      this.r.logger.warn('group commit of outcomes failed; each report is applied alone', { runs: group.length, error: String(err) });
    }
    for (const waiting of group) waiting.resolve(committed.get(waiting.report.runId) ?? null);
  }
}
