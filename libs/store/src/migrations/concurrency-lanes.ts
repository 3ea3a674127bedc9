import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Concurrency lanes (DESIGN.md `concurrency_lanes`): a run carries its function's lane limit,
 * copied at creation, next to its `concurrency_key`. A lane's occupancy is the count of its lease
 * rows, never a stored counter.
 */
export class ConcurrencyLanes1733000000000 implements MigrationInterface {
  name = 'ConcurrencyLanes1733000000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE runs ADD COLUMN concurrency_limit INTEGER`);
    await runner.query(`CREATE INDEX leases_lane ON leases (lane)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX leases_lane`);
    await runner.query(`ALTER TABLE runs DROP COLUMN concurrency_limit`);
  }
}
