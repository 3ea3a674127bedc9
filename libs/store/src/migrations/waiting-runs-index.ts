import { MigrationInterface, QueryRunner } from 'typeorm';

/** The waiting-run pass pages through waiting runs by id: a partial index keeps a page cheap however many runs have ended. */
export class WaitingRunsIndex1733100000000 implements MigrationInterface {
  name = 'WaitingRunsIndex1733100000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE INDEX runs_waiting ON runs (id) WHERE status = 'waiting'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX runs_waiting`);
  }
}
