import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A run has at most one `run.created` audit row: a unique partial index on `audit_events (run_id)`
 * for that event type, and the audit inserts skip a row it refuses (`ON CONFLICT DO NOTHING`). So
 * an admission cut off after its row was sent (a crash, a store error before the dispatch) and the
 * orphan sweep or the pass that admits the run again write one row between them, whichever lands
 * first. Rows of the same run written twice before this migration are reduced to the first.
 */
export class RunCreatedOnce1734900000000 implements MigrationInterface {
  name = 'RunCreatedOnce1734900000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      `DELETE FROM audit_events WHERE event_type = 'run.created' AND run_id IS NOT NULL
         AND id NOT IN (SELECT MIN(id) FROM audit_events WHERE event_type = 'run.created' AND run_id IS NOT NULL GROUP BY run_id)`,
    );
    await runner.query(`CREATE UNIQUE INDEX audit_events_run_created ON audit_events (run_id) WHERE event_type = 'run.created'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX audit_events_run_created`);
  }
}
