import { Tx } from '../tx';

/** Records a run event that could not be published: subject and reason, never the payload. */
export async function insertDeadLetter(tx: Tx, subject: string, reason: string): Promise<void> {
  await tx.execute(`INSERT INTO dead_letters (subject, reason, created_at) VALUES ($1, $2, $3)`, [subject, reason.slice(0, 1000), tx.now]);
}

export async function listDeadLetters(tx: Tx): Promise<{ subject: string; reason: string; createdAt: number }[]> {
  const rows = await tx.query(`SELECT * FROM dead_letters ORDER BY id`);
  return rows.map((r) => ({ subject: String(r.subject), reason: String(r.reason), createdAt: Number(r.created_at) }));
}
