import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `pass_cursors`: where a scheduler pass that reads the event log in order got to (`ts` store
 * clock ms, `id` the last event), by pass name, so a restart resumes there instead of skipping
 * what it had not read. Moved only forward (`queries/pass-cursors.ts`).
 */
export class PassCursors1734900000001 implements MigrationInterface {
  name = 'PassCursors1734900000001';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE pass_cursors (name TEXT PRIMARY KEY, ts BIGINT NOT NULL, id TEXT NOT NULL)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE pass_cursors`);
  }
}
