import { Tx, unitWithLockLimit } from '@ironflow/store';
import { EngineResources } from './resources';

/**
 * Best-effort store work of a follow-up (specification, "A stuck store cannot take the pool"):
 * it takes a slot of `followUpSlots` and keeps to `followUpBudgetMs`, the wait for the slot
 * included; on PostgreSQL its lock waits end at what is left of the budget. So a burst of them on
 * a stuck table holds no more connections than the slots, and each ends by its budget. Resolves
 * `null` once `work` committed, else why not (no slot in time, the budget spent, the store
 * refused); never rejects.
 */
export async function boundedFollowUpWrite(r: EngineResources, name: string, work: (tx: Tx) => Promise<unknown>): Promise<string | null> {
  const deadline = Date.now() + r.config.followUpBudgetMs;
  const release = await r.followUpSlots.acquireWithin(r.config.followUpBudgetMs);
  if (!release) return `no follow-up slot came free in ${r.config.followUpBudgetMs} ms`;
  try {
    const left = deadline - Date.now();
    if (left <= 0) return `its ${r.config.followUpBudgetMs} ms budget was spent waiting for a slot`;
    await unitWithLockLimit(r.store, name, left, work);
    return null;
  } catch (err) {
    return String(err);
  } finally {
    release();
  }
}
