import { MigrationInterface, QueryRunner } from 'typeorm';

/** Listing events newest first (`GET /api/v1/events`, the runs UI) pages through an index, not the whole log. */
export class EventsListingIndex1734500000000 implements MigrationInterface {
  name = 'EventsListingIndex1734500000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE INDEX events_listing ON events (project, env, ts, id)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX events_listing`);
  }
}
