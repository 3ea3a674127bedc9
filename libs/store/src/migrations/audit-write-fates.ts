import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The fate of each audit write request sent over NATS (DESIGN.md "Audit"; issue 10: "lost rows
 * are counted exactly"): the audit-writer inserts `written` for a request in the transaction that
 * inserts its rows, and a sender that got no answer inserts `given_up`. The primary key lets only
 * the first of the two land, so a sender learns whether rows it heard nothing about were stored,
 * and a writer never stores rows their sender has already counted as lost. `at` (store clock, ms)
 * lets the writer delete fates no one can ask about any more.
 */
export class AuditWriteFates1734800000000 implements MigrationInterface {
  name = 'AuditWriteFates1734800000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE audit_write_fates (request_id TEXT PRIMARY KEY, fate TEXT NOT NULL, at BIGINT NOT NULL)`);
    await runner.query(`CREATE INDEX audit_write_fates_at ON audit_write_fates (at)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE audit_write_fates`);
  }
}
