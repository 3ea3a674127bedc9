import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Pause / resume (a run parks at its next segment boundary) and developer pub/sub topics.
 * - `runs.pause_requested` (0/1): an operator asked for a pause; set from the request until the
 *   resume. `pause_reason`: the operator's reason. `resume_status`: where a resume sends a
 *   `paused` run (`waiting` while its wait is still open, `waiting_for_capacity` once its next
 *   segment is due); NULL unless paused.
 * - `steps.injected` (0/1): the step's output was set by `InjectStepOutput`.
 * - `topics`: one row per published topic with its count and first/last publish times (store
 *   clock, ms), which `ListTopics` reads.
 */
export class PauseAndTopics1734400000000 implements MigrationInterface {
  name = 'PauseAndTopics1734400000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE runs ADD COLUMN pause_requested SMALLINT NOT NULL DEFAULT 0`);
    await runner.query(`ALTER TABLE runs ADD COLUMN pause_reason TEXT`);
    await runner.query(`ALTER TABLE runs ADD COLUMN resume_status TEXT`);
    await runner.query(`ALTER TABLE steps ADD COLUMN injected SMALLINT NOT NULL DEFAULT 0`);
    await runner.query(`CREATE TABLE topics (
      project TEXT NOT NULL, env TEXT NOT NULL, name TEXT NOT NULL,
      message_count BIGINT NOT NULL DEFAULT 0, first_message_at BIGINT NOT NULL, last_message_at BIGINT NOT NULL,
      PRIMARY KEY (project, env, name))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE topics`);
    await runner.query(`ALTER TABLE steps DROP COLUMN injected`);
    for (const column of ['resume_status', 'pause_reason', 'pause_requested']) await runner.query(`ALTER TABLE runs DROP COLUMN ${column}`);
  }
}
