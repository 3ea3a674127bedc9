import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When a step started: `steps.started_at` (ms). For a `step.run` it is the worker's `started_at`
 * (else its `ended_at` − `duration_ms`); NULL for waits and for rows written before this
 * migration, whose start is their `created_at` (when the wait began).
 */
export class StepStartedAt1734700000007 implements MigrationInterface {
  name = 'StepStartedAt1734700000007';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE steps ADD COLUMN started_at BIGINT`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE steps DROP COLUMN started_at`);
  }
}
