import { Tx } from '../tx';

/**
 * The queue's backlog for the scrape-time gauges: per mode, the runs ready to be claimed
 * (`waiting_for_capacity` with `available_at` passed; DESIGN.md "The queue is the runs table") and
 * when the oldest of them became ready (ms, store clock), read through the `runs_queue` partial
 * index; and the registered workers seen since `seenSince` (ms). Across every project and env.
 */
export async function sampleBacklog(
  tx: Tx,
  seenSince: number,
): Promise<{ queued: { mode: string; count: number; oldestAvailableAt: number | null }[]; activeWorkers: number }> {
  const queued = await tx.query<{ mode: string; queued: unknown; oldest: unknown }>(
    `SELECT mode, COUNT(*) AS queued, MIN(available_at) AS oldest FROM runs
     WHERE status = 'waiting_for_capacity' AND available_at <= $1 GROUP BY mode`,
    [tx.now],
  );
  const workers = await tx.query<{ active: unknown }>(`SELECT COUNT(*) AS active FROM workers WHERE last_seen_at >= $1`, [seenSince]);
  return {
    queued: queued.map((r) => ({ mode: String(r.mode), count: Number(r.queued), oldestAvailableAt: r.oldest == null ? null : Number(r.oldest) })),
    activeWorkers: Number(workers[0]?.active ?? 0),
  };
}
