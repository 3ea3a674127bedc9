import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * API keys and secrets (issue 9, items 4 and 7). One statement list for both stores.
 *
 * - `api_keys`: one row per key, scoped to a project and an environment. Only the SHA-256 of the
 *   key is kept (`key_hash`, hex); `id` is the public part of the key (`ifk_<id>_<secret>`), so
 *   a presented key is looked up by id and its hash compared in constant time. A revoked key
 *   keeps its row (`revoked_at`): rows are never deleted, so "keys are configured" (some row
 *   exists) can never silently turn back into "open".
 * - `secrets`: one row per (project, env, name); `ciphertext` is AES-256-GCM output
 *   (`v1:<base64 iv|tag|ciphertext>`), never the value.
 */
export class ApiKeysAndSecrets1734300000000 implements MigrationInterface {
  name = 'ApiKeysAndSecrets1734300000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE api_keys (
      id TEXT PRIMARY KEY, project TEXT NOT NULL, env TEXT NOT NULL, name TEXT NOT NULL,
      key_hash TEXT NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT)`);
    await runner.query(`CREATE TABLE secrets (
      project TEXT NOT NULL, env TEXT NOT NULL, name TEXT NOT NULL, ciphertext TEXT NOT NULL,
      created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
      PRIMARY KEY (project, env, name))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE IF EXISTS secrets`);
    await runner.query(`DROP TABLE IF EXISTS api_keys`);
  }
}
