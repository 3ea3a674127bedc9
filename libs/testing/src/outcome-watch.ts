import { TERMINAL_RUN_STATUSES } from '@ironflow/contracts';
import { withPg } from './scratch-database';

/** What the outcome watch saw, read from the rows its triggers wrote. */
export interface OutcomeWatchReport {
  /** Runs that reached a terminal status (an outcome committed) while the watch was installed. */
  outcomesCommitted: number;
  /**
   * Writes that changed a run already ended: its status, output, error, `ended_at` or version
   * moved after the first terminal commit (must be 0: seed "one outcome per run").
   */
  outcomesReplaced: number;
  /** The runs of those writes (at most 20), for the failure message. */
  replacedRunIds: string[];
  /**
   * Waiting steps (invoke, `waitForEvent`, sleep) resolved more than once: a step changed again
   * after it left `waiting`. For invoke steps this is a parent woken twice by its child (must be 0).
   */
  parentsWokenTwice: number;
  /** Other waits (sleeps, `waitForEvent`) resolved more than once (must be 0). */
  waitsResolvedTwice: number;
}

const TERMINAL = TERMINAL_RUN_STATUSES.map((s) => `'${s}'`).join(', ');

/**
 * Row-level evidence of the outcome contract on a PostgreSQL engine database (the store's schema
 * must exist: install after the first service or engine opened it). `install` adds two log tables
 * and AFTER triggers on `runs` and `steps` in that database only; `read` counts from them. The
 * rows are the store's own, so the counts hold across killed processes and lost audit rows.
 */
export class OutcomeWatch {
  private constructor(private readonly databaseUrl: string) {}

  /** Installs the triggers (idempotent) in the database at `databaseUrl`. */
  static async install(databaseUrl: string): Promise<OutcomeWatch> {
    await withPg(databaseUrl, async (c) => {
      await c.query(`CREATE TABLE IF NOT EXISTS outcome_watch_runs (
        id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL,
        old_status TEXT, new_status TEXT NOT NULL, old_version INTEGER, new_version INTEGER NOT NULL)`);
      await c.query(`CREATE TABLE IF NOT EXISTS outcome_watch_steps (
        id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, step_id TEXT NOT NULL, type TEXT NOT NULL,
        old_status TEXT NOT NULL, new_status TEXT NOT NULL)`);
      await c.query(`CREATE OR REPLACE FUNCTION outcome_watch_runs_log() RETURNS trigger AS $$
        BEGIN
          IF TG_OP = 'UPDATE' AND OLD.status IN (${TERMINAL}) THEN
            IF OLD.status IS DISTINCT FROM NEW.status OR OLD.output IS DISTINCT FROM NEW.output OR OLD.error IS DISTINCT FROM NEW.error
               OR OLD.ended_at IS DISTINCT FROM NEW.ended_at OR OLD.version IS DISTINCT FROM NEW.version THEN
              INSERT INTO outcome_watch_runs (run_id, kind, old_status, new_status, old_version, new_version)
              VALUES (NEW.id, 'replaced', OLD.status, NEW.status, OLD.version, NEW.version);
            END IF;
          ELSIF NEW.status IN (${TERMINAL}) THEN
            INSERT INTO outcome_watch_runs (run_id, kind, old_status, new_status, old_version, new_version)
            VALUES (NEW.id, 'committed', CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status, CASE WHEN TG_OP = 'UPDATE' THEN OLD.version END, NEW.version);
          END IF;
          RETURN NULL;
        END $$ LANGUAGE plpgsql`);
      await c.query(`CREATE OR REPLACE FUNCTION outcome_watch_steps_log() RETURNS trigger AS $$
        BEGIN
          IF OLD.type IN ('invoke', 'wait_for_event', 'sleep') AND OLD.status <> 'waiting'
             AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.output IS DISTINCT FROM NEW.output OR OLD.error IS DISTINCT FROM NEW.error) THEN
            INSERT INTO outcome_watch_steps (run_id, step_id, type, old_status, new_status) VALUES (NEW.run_id, NEW.step_id, NEW.type, OLD.status, NEW.status);
          END IF;
          RETURN NULL;
        END $$ LANGUAGE plpgsql`);
      await c.query(`DROP TRIGGER IF EXISTS outcome_watch_runs ON runs`);
      await c.query(`CREATE TRIGGER outcome_watch_runs AFTER INSERT OR UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION outcome_watch_runs_log()`);
      await c.query(`DROP TRIGGER IF EXISTS outcome_watch_steps ON steps`);
      await c.query(`CREATE TRIGGER outcome_watch_steps AFTER UPDATE ON steps FOR EACH ROW EXECUTE FUNCTION outcome_watch_steps_log()`);
    });
    return new OutcomeWatch(databaseUrl);
  }

  /** Counts what the triggers logged so far. */
  async read(): Promise<OutcomeWatchReport> {
    return withPg(this.databaseUrl, async (c) => {
      const runs = (await c.query(`SELECT kind, COUNT(*)::int AS n FROM outcome_watch_runs GROUP BY kind`)).rows as { kind: string; n: number }[];
      const replaced = (await c.query(`SELECT DISTINCT run_id FROM outcome_watch_runs WHERE kind = 'replaced' LIMIT 20`)).rows as { run_id: string }[];
      const steps = (await c.query(`SELECT type, COUNT(DISTINCT (run_id, step_id))::int AS n FROM outcome_watch_steps GROUP BY type`)).rows as { type: string; n: number }[];
      const count = <T extends { n: number }>(rows: T[], accept: (r: T) => boolean) => rows.filter(accept).reduce((sum, r) => sum + r.n, 0);
      return {
        outcomesCommitted: count(runs, (r) => r.kind === 'committed'),
        outcomesReplaced: count(runs, (r) => r.kind === 'replaced'),
        replacedRunIds: replaced.map((r) => r.run_id),
        parentsWokenTwice: count(steps, (r) => r.type === 'invoke'),
        waitsResolvedTwice: count(steps, (r) => r.type !== 'invoke'),
      };
    });
  }
}
