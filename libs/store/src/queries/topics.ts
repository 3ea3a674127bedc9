import { Tx } from '../tx';

/** One developer pub/sub topic as `ListTopics` reports it (times in ms on the store clock). */
export interface TopicRecord {
  name: string;
  messageCount: number;
  firstMessageAt: number;
  lastMessageAt: number;
}

/** Counts one stored publish to a topic: creates its row, or bumps its count and last time. */
export async function recordPublish(tx: Tx, project: string, env: string, name: string): Promise<void> {
  await tx.execute(
    `INSERT INTO topics (project, env, name, message_count, first_message_at, last_message_at) VALUES ($1, $2, $3, 1, $4, $4)
     ON CONFLICT (project, env, name) DO UPDATE SET message_count = topics.message_count + 1, last_message_at = excluded.last_message_at`,
    [project, env, name, tx.now],
  );
}

/** The topics of a project and env, by name. */
export async function listTopics(tx: Tx, project: string, env: string): Promise<TopicRecord[]> {
  const rows = await tx.query<{ name: string; message_count: unknown; first_message_at: unknown; last_message_at: unknown }>(
    `SELECT name, message_count, first_message_at, last_message_at FROM topics WHERE project = $1 AND env = $2 ORDER BY name`,
    [project, env],
  );
  return rows.map((r) => ({ name: String(r.name), messageCount: Number(r.message_count), firstMessageAt: Number(r.first_message_at), lastMessageAt: Number(r.last_message_at) }));
}
