import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An execution's deadline (DESIGN.md "Leases and fencing"): `leases.deadline_at`, the claim time
 * plus the function's `timeoutMs`, on the store clock. Heartbeats and progress extend
 * `expires_at`, never the deadline; the capacity scanner fails an execution past it with
 * `FUNCTION_TIMED_OUT`. NULL for leases written before this migration (no deadline).
 */
export class LeaseDeadline1734100000001 implements MigrationInterface {
  name = 'LeaseDeadline1734100000001';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE leases ADD COLUMN deadline_at BIGINT`);
    await runner.query(`CREATE INDEX leases_deadline ON leases (deadline_at) WHERE deadline_at IS NOT NULL`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX leases_deadline`);
    await runner.query(`ALTER TABLE leases DROP COLUMN deadline_at`);
  }
}
