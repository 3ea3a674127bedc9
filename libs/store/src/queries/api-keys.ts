import { Tx } from '../tx';

/** An `api_keys` row. `keyHash` is the hex SHA-256 of the whole key; the key itself is never stored. Times in ms. */
export interface ApiKeyRecord {
  id: string;
  project: string;
  env: string;
  name: string;
  keyHash: string;
  createdAt: number;
  revokedAt: number | null;
}

function mapApiKey(r: Record<string, unknown>): ApiKeyRecord {
  return {
    id: String(r.id),
    project: String(r.project),
    env: String(r.env),
    name: String(r.name),
    keyHash: String(r.key_hash),
    createdAt: Number(r.created_at),
    revokedAt: r.revoked_at === null || r.revoked_at === undefined ? null : Number(r.revoked_at),
  };
}

export async function insertApiKey(tx: Tx, key: Omit<ApiKeyRecord, 'createdAt' | 'revokedAt'>): Promise<ApiKeyRecord> {
  const { rows } = await tx.execute(
    `INSERT INTO api_keys (id, project, env, name, key_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
    [key.id, key.project, key.env, key.name, key.keyHash, tx.now],
  );
  return mapApiKey(rows[0]);
}

export async function getApiKey(tx: Tx, id: string): Promise<ApiKeyRecord | null> {
  const rows = await tx.query(`SELECT * FROM api_keys WHERE id = $1`, [id]);
  return rows.length ? mapApiKey(rows[0]) : null;
}

/** Every key, revoked ones included, oldest first. */
export async function listApiKeys(tx: Tx): Promise<ApiKeyRecord[]> {
  const rows = await tx.query(`SELECT * FROM api_keys ORDER BY created_at, id`);
  return rows.map(mapApiKey);
}

/** Marks a key revoked (once: a second revoke keeps the first time). Returns the row, `null` when there is no such key. */
export async function revokeApiKey(tx: Tx, id: string): Promise<ApiKeyRecord | null> {
  await tx.execute(`UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, [id, tx.now]);
  return getApiKey(tx, id);
}

/** True once any key was ever created (revoked keys count: a deployment with keys never turns open again). */
export async function anyApiKey(tx: Tx): Promise<boolean> {
  const rows = await tx.query(`SELECT 1 AS one FROM api_keys LIMIT 1`);
  return rows.length > 0;
}
