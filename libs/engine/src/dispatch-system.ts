import { randomUUID } from 'node:crypto';
import { leasesSql, runsSql, ClaimFilter } from '@ironflow/store';
import { EngineResources } from './resources';
import { Segment, loadSegment } from './segment-loader';

/**
 * Claims queued segments (DESIGN.md "The queue is the runs table"): one unit of work claims up to
 * `limit` runs, bumps each execution and inserts its lease for `holder` (with the execution's
 * deadline, now + the function's `timeoutMs`), and loads what the worker needs. Claims skip rows another claimer holds, so two dispatchers never run one
 * execution twice.
 */
export class DispatchSystem {
  constructor(private readonly r: EngineResources) {}

  async claim(filter: ClaimFilter, holder: string): Promise<Segment[]> {
    if (filter.limit <= 0) return [];
    const segments = await this.r.store.unitOfWork('claimSegments', async (tx) => {
      const runs = await runsSql.claimRuns(tx, filter, () => randomUUID());
      const loaded: Segment[] = [];
      for (const run of runs) {
        const segment = await loadSegment(tx, run);
        // The execution's deadline: the function's timeout from now, on every transport (the capacity scanner enforces it).
        const deadlineAt = segment.definition ? tx.now + segment.definition.timeoutMs : null;
        await leasesSql.insertLease(tx, run.id, run.executionSeq, holder, runsSql.laneOf(run.functionId, run.concurrencyKey), tx.now + this.r.config.leaseMs, deadlineAt);
        loaded.push(segment);
      }
      return loaded;
    });
    if (segments.length) this.r.metrics.segmentsDispatched.inc({ mode: filter.mode }, segments.length);
    return segments;
  }
}
