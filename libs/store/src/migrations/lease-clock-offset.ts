import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `leases.clock_offset_ms`: the most the engine knows the worker's clock to be ahead of the store
 * clock for this execution (from the `ended_at` of the steps it checkpointed, against when each
 * report arrived), so a later sleep's `until` can be bounded (README "Sleeps and clocks"). NULL
 * until a checkpoint carries a worker time.
 */
export class LeaseClockOffset1734100000002 implements MigrationInterface {
  name = 'LeaseClockOffset1734100000002';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE leases ADD COLUMN clock_offset_ms BIGINT`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE leases DROP COLUMN clock_offset_ms`);
  }
}
