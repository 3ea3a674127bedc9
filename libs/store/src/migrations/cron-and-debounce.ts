import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Cron schedules and pending debounced events (DESIGN.md `scheduler`: cron, debounce).
 *
 * `cron_schedules`: one row per function with cron triggers: `spec` (the triggers' schedules as
 * registered, so an unchanged registration keeps its place) and `next_at`, the next tick the
 * scheduler fires (ms, store clock). A tick's run is keyed by an event id derived from the function
 * and the tick, so two schedulers never start a tick twice.
 *
 * `debounces`: one row per debounced function and key: the last event of the quiet period
 * (`event_id`), when the window closes (`due_at`) and the max-wait cap (`deadline_at`, null = none).
 */
export class CronAndDebounce1734200000000 implements MigrationInterface {
  name = 'CronAndDebounce1734200000000';

  async up(runner: QueryRunner): Promise<void> {
    const statements = [
      `CREATE TABLE cron_schedules (
        project TEXT NOT NULL, env TEXT NOT NULL, function_id TEXT NOT NULL,
        spec TEXT NOT NULL, next_at BIGINT NOT NULL,
        PRIMARY KEY (project, env, function_id))`,
      `CREATE INDEX cron_schedules_due ON cron_schedules (next_at)`,
      `CREATE TABLE debounces (
        project TEXT NOT NULL, env TEXT NOT NULL, function_id TEXT NOT NULL, debounce_key TEXT NOT NULL,
        event_id TEXT NOT NULL, due_at BIGINT NOT NULL, deadline_at BIGINT, created_at BIGINT NOT NULL,
        PRIMARY KEY (project, env, function_id, debounce_key))`,
      `CREATE INDEX debounces_due ON debounces (due_at)`,
    ];
    for (const statement of statements) await runner.query(statement);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE IF EXISTS debounces`);
    await runner.query(`DROP TABLE IF EXISTS cron_schedules`);
  }
}
