import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The instance authority (DESIGN.md "Data model"; specification, "A freeze, thaw, reconcile or
 * attest holds the instance authority row"): one row (`id` 1) with the instance's `state`
 * (`thawed` or `frozen`), a `version` bumped by every transition, when the last transition
 * committed (`changed_at`, store clock, ms) and who asked for it (`changed_by`). Every unit of work
 * that admits work reads it under a shared lock, so an open freeze or thaw holds them back.
 */
export class InstanceAuthority1734700000000 implements MigrationInterface {
  name = 'InstanceAuthority1734700000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE instance_authority (
      id SMALLINT PRIMARY KEY, state TEXT NOT NULL, version BIGINT NOT NULL,
      changed_at BIGINT, changed_by TEXT, reason TEXT)`);
    await runner.query(`INSERT INTO instance_authority (id, state, version) VALUES (1, 'thawed', 0)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE instance_authority`);
  }
}
