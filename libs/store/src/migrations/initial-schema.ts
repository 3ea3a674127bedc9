import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The tables of DESIGN.md "Data model" that the run lifecycle needs. One statement list serves
 * both stores; only column types differ. Times are ms since the epoch on the store clock (BIGINT),
 * JSON values are stored as text, flags as SMALLINT 0/1.
 */
export class InitialSchema1732900000000 implements MigrationInterface {
  name = 'InitialSchema1732900000000';

  async up(runner: QueryRunner): Promise<void> {
    const pg = runner.connection.options.type === 'postgres';
    const serial = pg ? 'BIGSERIAL PRIMARY KEY' : 'INTEGER PRIMARY KEY AUTOINCREMENT';
    const statements = [
      `CREATE TABLE functions (
        project TEXT NOT NULL, env TEXT NOT NULL, id TEXT NOT NULL,
        version INTEGER NOT NULL, mode TEXT NOT NULL, endpoint_url TEXT,
        definition TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'active',
        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
        PRIMARY KEY (project, env, id))`,
      `CREATE TABLE function_triggers (
        project TEXT NOT NULL, env TEXT NOT NULL, event_name TEXT NOT NULL, function_id TEXT NOT NULL,
        PRIMARY KEY (project, env, event_name, function_id))`,
      `CREATE TABLE events (
        id TEXT PRIMARY KEY, project TEXT NOT NULL, env TEXT NOT NULL, name TEXT NOT NULL,
        data TEXT NOT NULL, idempotency_key TEXT, ts BIGINT NOT NULL)`,
      `CREATE UNIQUE INDEX events_idempotency ON events (project, env, idempotency_key) WHERE idempotency_key IS NOT NULL`,
      `CREATE TABLE runs (
        id TEXT PRIMARY KEY, project TEXT NOT NULL, env TEXT NOT NULL,
        function_id TEXT NOT NULL, function_version INTEGER NOT NULL, mode TEXT NOT NULL,
        event_id TEXT, status TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 1,
        attempt INTEGER NOT NULL DEFAULT 1, max_attempts INTEGER NOT NULL,
        execution_seq INTEGER NOT NULL DEFAULT 0, lease_token TEXT,
        available_at BIGINT NOT NULL, recoveries INTEGER NOT NULL DEFAULT 0,
        parent_run_id TEXT, parent_step_id TEXT, wake_pending SMALLINT NOT NULL DEFAULT 0,
        concurrency_key TEXT, input TEXT NOT NULL, output TEXT, error TEXT,
        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, started_at BIGINT, ended_at BIGINT)`,
      `CREATE UNIQUE INDEX runs_function_event ON runs (project, env, function_id, event_id) WHERE event_id IS NOT NULL`,
      `CREATE UNIQUE INDEX runs_parent_step ON runs (parent_run_id, parent_step_id) WHERE parent_run_id IS NOT NULL`,
      `CREATE INDEX runs_queue ON runs (mode, available_at) WHERE status = 'waiting_for_capacity'`,
      `CREATE INDEX runs_wake_pending ON runs (ended_at) WHERE wake_pending = 1`,
      `CREATE INDEX runs_listing ON runs (project, env, created_at)`,
      `CREATE TABLE leases (
        run_id TEXT PRIMARY KEY, execution_seq INTEGER NOT NULL, holder TEXT NOT NULL,
        lane TEXT NOT NULL, expires_at BIGINT NOT NULL)`,
      `CREATE INDEX leases_expiry ON leases (expires_at)`,
      `CREATE TABLE steps (
        run_id TEXT NOT NULL, step_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
        status TEXT NOT NULL, output TEXT, error TEXT, wake_at BIGINT, claimed_at BIGINT,
        child_run_id TEXT, timeout_at BIGINT, sequence INTEGER NOT NULL,
        created_at BIGINT NOT NULL, ended_at BIGINT,
        PRIMARY KEY (run_id, step_id))`,
      `CREATE INDEX steps_sleeping ON steps (wake_at) WHERE status = 'waiting' AND type = 'sleep'`,
      `CREATE INDEX steps_invoke_timeout ON steps (timeout_at) WHERE status = 'waiting' AND type = 'invoke'`,
      `CREATE TABLE waiting_correlations (
        run_id TEXT NOT NULL, step_id TEXT NOT NULL, project TEXT NOT NULL, env TEXT NOT NULL,
        event_name TEXT NOT NULL, match_path TEXT, match_value TEXT, satisfied SMALLINT NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, step_id))`,
      `CREATE INDEX waiting_correlations_open ON waiting_correlations (project, env, event_name) WHERE satisfied = 0`,
      `CREATE TABLE workers (
        id TEXT PRIMARY KEY, project TEXT NOT NULL, env TEXT NOT NULL, function_ids TEXT NOT NULL,
        max_concurrent_jobs INTEGER NOT NULL, hostname TEXT, labels TEXT NOT NULL,
        registered_at BIGINT NOT NULL, last_seen_at BIGINT NOT NULL)`,
      `CREATE TABLE audit_events (
        id ${serial}, run_id TEXT, function_id TEXT, event_type TEXT NOT NULL,
        cause TEXT, data TEXT, ts BIGINT NOT NULL)`,
      `CREATE INDEX audit_events_run ON audit_events (run_id, id)`,
      `CREATE TABLE dead_letters (
        id ${serial}, subject TEXT NOT NULL, reason TEXT NOT NULL, created_at BIGINT NOT NULL)`,
    ];
    for (const statement of statements) await runner.query(statement);
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const table of ['dead_letters', 'audit_events', 'workers', 'waiting_correlations', 'steps', 'leases', 'runs', 'events', 'function_triggers', 'functions']) {
      await runner.query(`DROP TABLE IF EXISTS ${table}`);
    }
  }
}
