import { EXECUTION_MODES, ExecutionMode } from '@ironflow/contracts';
import { BacklogSample } from '@ironflow/observability';
import { backlogSql } from '@ironflow/store';
import { EngineResources } from './resources';

/**
 * Reads the backlog the capacity scanner exports at scrape time (`EngineMetrics.exportBacklog`):
 * queued runs by mode and the oldest one's ready time, and the workers seen within one lease.
 */
export async function sampleBacklog(r: EngineResources): Promise<BacklogSample> {
  return r.store.read('sampleBacklog', async (tx) => {
    const sample = await backlogSql.sampleBacklog(tx, tx.now - r.config.leaseMs);
    return {
      queued: sample.queued.filter((q): q is typeof q & { mode: ExecutionMode } => (EXECUTION_MODES as readonly string[]).includes(q.mode)),
      activeWorkers: sample.activeWorkers,
      now: tx.now,
    };
  });
}
