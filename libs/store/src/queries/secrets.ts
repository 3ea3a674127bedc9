import { Tx } from '../tx';

/** A secret's row without its value: what listings show. Times in ms. */
export interface SecretInfo {
  name: string;
  createdAt: number;
  updatedAt: number;
}

/** Inserts or replaces a secret's ciphertext (one statement, so concurrent sets never collide). */
export async function upsertSecret(tx: Tx, project: string, env: string, name: string, ciphertext: string): Promise<SecretInfo> {
  const { rows } = await tx.execute(
    `INSERT INTO secrets (project, env, name, ciphertext, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)
     ON CONFLICT (project, env, name) DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at
     RETURNING name, created_at, updated_at`,
    [project, env, name, ciphertext, tx.now],
  );
  return mapInfo(rows[0]);
}

export async function listSecrets(tx: Tx, project: string, env: string): Promise<SecretInfo[]> {
  const rows = await tx.query(`SELECT name, created_at, updated_at FROM secrets WHERE project = $1 AND env = $2 ORDER BY name`, [project, env]);
  return rows.map(mapInfo);
}

/** Deletes a secret; false when there was none. */
export async function deleteSecret(tx: Tx, project: string, env: string, name: string): Promise<boolean> {
  const r = await tx.execute(`DELETE FROM secrets WHERE project = $1 AND env = $2 AND name = $3`, [project, env, name]);
  return r.affected === 1;
}

/** The ciphertexts of `names` that exist, by name (names without a row are absent). */
export async function getSecretCiphertexts(tx: Tx, project: string, env: string, names: readonly string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const placeholders = names.map((_, i) => `$${i + 3}`).join(', ');
  const rows = await tx.query(`SELECT name, ciphertext FROM secrets WHERE project = $1 AND env = $2 AND name IN (${placeholders})`, [project, env, ...names]);
  return new Map(rows.map((r) => [String(r.name), String(r.ciphertext)]));
}

function mapInfo(r: Record<string, unknown>): SecretInfo {
  return { name: String(r.name), createdAt: Number(r.created_at), updatedAt: Number(r.updated_at) };
}
