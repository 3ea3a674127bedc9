import { WorkerRecord, mapWorker, toJson } from '../rows';
import { Tx } from '../tx';

/**
 * Registers a worker or replaces its registration. False (nothing written) when the id is
 * registered in another project: a worker id is never taken over across projects.
 */
export async function upsertWorker(tx: Tx, w: Omit<WorkerRecord, 'registeredAt' | 'lastSeenAt'>): Promise<boolean> {
  const r = await tx.execute(
    `INSERT INTO workers (id, project, env, function_ids, max_concurrent_jobs, hostname, labels, registered_at, last_seen_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
     ON CONFLICT (id) DO UPDATE SET project = excluded.project, env = excluded.env, function_ids = excluded.function_ids,
       max_concurrent_jobs = excluded.max_concurrent_jobs, hostname = excluded.hostname, labels = excluded.labels,
       last_seen_at = excluded.last_seen_at
     WHERE workers.project = excluded.project`,
    [w.id, w.project, w.env, toJson(w.functionIds), w.maxConcurrentJobs, w.hostname, toJson(w.labels), tx.now],
  );
  return r.affected === 1;
}

export async function getWorker(tx: Tx, id: string): Promise<WorkerRecord | null> {
  const rows = await tx.query(`SELECT * FROM workers WHERE id = $1`, [id]);
  return rows.length ? mapWorker(rows[0]) : null;
}

/** Marks a worker seen; false when it is not registered (in `owner`'s project, and env when given). */
export async function touchWorker(tx: Tx, id: string, owner?: { project: string; env?: string }): Promise<boolean> {
  const r = !owner
    ? await tx.execute(`UPDATE workers SET last_seen_at = $2 WHERE id = $1`, [id, tx.now])
    : owner.env === undefined
      ? await tx.execute(`UPDATE workers SET last_seen_at = $2 WHERE id = $1 AND project = $3`, [id, tx.now, owner.project])
      : await tx.execute(`UPDATE workers SET last_seen_at = $2 WHERE id = $1 AND project = $3 AND env = $4`, [id, tx.now, owner.project, owner.env]);
  return r.affected === 1;
}

export async function listWorkers(tx: Tx, project: string, env: string): Promise<WorkerRecord[]> {
  const rows = await tx.query(`SELECT * FROM workers WHERE project = $1 AND env = $2 ORDER BY id`, [project, env]);
  return rows.map(mapWorker);
}
