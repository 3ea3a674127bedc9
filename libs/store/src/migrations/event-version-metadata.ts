import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An event's `version` (an integer ≥ 1, default 1) and `metadata` (a JSON object as text, NULL
 * when the event has none), carried to the handler on every transport (WIRE-PROTOCOL.md 2.2,
 * 3.4, 4.6 `Event` fields 7 and 8).
 */
export class EventVersionMetadata1734100000000 implements MigrationInterface {
  name = 'EventVersionMetadata1734100000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE events ADD COLUMN version INTEGER NOT NULL DEFAULT 1`);
    await runner.query(`ALTER TABLE events ADD COLUMN metadata TEXT`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE events DROP COLUMN metadata`);
    await runner.query(`ALTER TABLE events DROP COLUMN version`);
  }
}
