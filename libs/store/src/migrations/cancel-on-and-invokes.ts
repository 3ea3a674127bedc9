import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `cancel_on` and invoke admission (DESIGN.md "Data model"; specification, "An invoked child
 * replays cancel_on and is read again before it is dispatched"):
 *
 * - `cancel_on_specs`: one row per `cancelOn` spec of a run, written in the run's creating
 *   transaction, with the JSON text of the run's value at the spec's `match` path. The live match
 *   looks rows up by (event name, path, value); the replay reads a run's own rows. `condition` is
 *   the spec's CEL `if`, evaluated against each candidate event.
 * - `function_invokes`: one row per accepted `step.invoke` (the flow map's edge, parent function →
 *   child function, and the pending invocation): `settled_at` stays NULL until the child's admission
 *   has replayed, dispatched or ended it and a fire-and-forget parent has resumed. A partial index
 *   keeps the pass over pending invocations in proportion to them.
 * - `runs.held`: a run created but not yet admitted to the queue. Claims skip it until its admission
 *   releases it; an outcome clears it. A partial index serves the orphan sweep.
 * - `events (project, env, name, ts)`: the replay's read of the event log.
 */
export class CancelOnAndInvokes1734600000000 implements MigrationInterface {
  name = 'CancelOnAndInvokes1734600000000';

  async up(runner: QueryRunner): Promise<void> {
    const statements = [
      `CREATE TABLE cancel_on_specs (
        run_id TEXT NOT NULL, spec_index INTEGER NOT NULL, project TEXT NOT NULL, env TEXT NOT NULL,
        event_name TEXT NOT NULL, match_path TEXT, match_value TEXT, condition TEXT, created_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, spec_index))`,
      `CREATE INDEX cancel_on_specs_match ON cancel_on_specs (project, env, event_name, match_path, match_value)`,
      `CREATE TABLE function_invokes (
        parent_run_id TEXT NOT NULL, parent_step_id TEXT NOT NULL, child_run_id TEXT NOT NULL,
        project TEXT NOT NULL, env TEXT NOT NULL, parent_function_id TEXT NOT NULL, child_function_id TEXT NOT NULL,
        async SMALLINT NOT NULL, created_row SMALLINT NOT NULL DEFAULT 0, created_at BIGINT NOT NULL, settled_at BIGINT,
        PRIMARY KEY (parent_run_id, parent_step_id))`,
      `CREATE INDEX function_invokes_pending ON function_invokes (created_at, parent_run_id, parent_step_id) WHERE settled_at IS NULL`,
      `CREATE INDEX function_invokes_child ON function_invokes (child_run_id)`,
      `ALTER TABLE runs ADD COLUMN held SMALLINT NOT NULL DEFAULT 0`,
      `CREATE INDEX runs_held ON runs (created_at, id) WHERE held = 1`,
      `CREATE INDEX events_name_ts ON events (project, env, name, ts)`,
    ];
    for (const statement of statements) await runner.query(statement);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX events_name_ts`);
    await runner.query(`DROP INDEX runs_held`);
    await runner.query(`ALTER TABLE runs DROP COLUMN held`);
    await runner.query(`DROP TABLE function_invokes`);
    await runner.query(`DROP TABLE cancel_on_specs`);
  }
}
