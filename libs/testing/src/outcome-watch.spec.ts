import { OutcomeWatch } from './outcome-watch';
import { scratchDatabase, ScratchDatabase, withPg } from './scratch-database';

/** The outcome watch's triggers on a PostgreSQL database with the columns of `runs` and `steps` they read. */
describe('OutcomeWatch on postgres', () => {
  let db: ScratchDatabase;

  beforeAll(async () => {
    db = await scratchDatabase('postgres', 'ironflow_watch');
    await withPg(db.url, async (c) => {
      await c.query(`CREATE TABLE runs (id TEXT PRIMARY KEY, status TEXT NOT NULL, version INTEGER NOT NULL, output TEXT, error TEXT, ended_at BIGINT, wake_pending SMALLINT NOT NULL DEFAULT 0)`);
      await c.query(`CREATE TABLE steps (run_id TEXT NOT NULL, step_id TEXT NOT NULL, type TEXT NOT NULL, status TEXT NOT NULL, output TEXT, error TEXT, PRIMARY KEY (run_id, step_id))`);
    });
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('counts first terminal commits, every later change of an ended run, and waits resolved twice', async () => {
    const watch = await OutcomeWatch.install(db.url);
    await OutcomeWatch.install(db.url); // idempotent: one trigger each
    await withPg(db.url, async (c) => {
      await c.query(`INSERT INTO runs (id, status, version) VALUES ('a', 'running', 1), ('b', 'waiting', 1), ('c', 'running', 1)`);
      await c.query(`INSERT INTO runs (id, status, version, output) VALUES ('d', 'completed', 1, '1')`);
      await c.query(`UPDATE runs SET status = 'completed', output = '2', version = 2, ended_at = 5 WHERE id = 'a'`);
      await c.query(`UPDATE runs SET wake_pending = 0 WHERE id = 'a'`); // not part of the outcome
      await c.query(`UPDATE runs SET status = 'cancelled', version = 2, ended_at = 5 WHERE id = 'b'`);
      await c.query(`UPDATE runs SET output = '3', version = 3 WHERE id = 'a'`); // replaced
      await c.query(`UPDATE runs SET status = 'failed', version = 3 WHERE id = 'b'`); // replaced
      await c.query(`INSERT INTO steps VALUES ('p', 'i', 'invoke', 'waiting', NULL, NULL), ('p', 's', 'sleep', 'waiting', NULL, NULL), ('p', 'r', 'run', 'running', NULL, NULL)`);
      await c.query(`UPDATE steps SET status = 'completed', output = '1' WHERE step_id IN ('i', 's', 'r')`);
      await c.query(`UPDATE steps SET output = '2' WHERE step_id IN ('i', 'r')`); // the invoke woken twice
    });
    expect(await watch.read()).toEqual({ outcomesCommitted: 3, outcomesReplaced: 2, replacedRunIds: expect.arrayContaining(['a', 'b']), parentsWokenTwice: 1, waitsResolvedTwice: 0 });
  });
});
