import { Client } from 'pg';
import { PREPARED_STATEMENT_MAX_PARAMETERS, PreparedStatementNames, placeholders } from '@ironflow/store';
import { TestStore, openTestStore, testDatabaseUrl } from '@ironflow/testing';

describe('PreparedStatementNames', () => {
  it('names a text with parameters on its second use, and keeps its name', () => {
    const names = new PreparedStatementNames();
    expect(names.nameOf('SELECT $1', 1)).toBeUndefined();
    const name = names.nameOf('SELECT $1', 1);
    expect(name).toMatch(/^ironflow_\d+$/);
    expect(names.nameOf('SELECT $1', 1)).toBe(name);
    expect(names.nameOf('SELECT $1, $2', 2)).toBeUndefined();
    expect(names.nameOf('SELECT $1, $2', 2)).not.toBe(name);
  });

  it('never names a text without parameters or with more than the maximum (a variable shape)', () => {
    const names = new PreparedStatementNames();
    const long = `SELECT 1 WHERE 1 IN (${placeholders(1, PREPARED_STATEMENT_MAX_PARAMETERS + 1)})`;
    for (let i = 0; i < 5; i += 1) {
      expect(names.nameOf('COMMIT', 0)).toBeUndefined();
      expect(names.nameOf(long, PREPARED_STATEMENT_MAX_PARAMETERS + 1)).toBeUndefined();
    }
    expect(names.size).toBe(0);
  });

  it('names at most `limit` texts; past it new texts run unnamed and named ones keep their name', () => {
    const names = new PreparedStatementNames(2);
    const text = (i: number) => `SELECT ${i} WHERE $1`;
    for (let i = 0; i < 4; i += 1) for (let use = 0; use < 3; use += 1) names.nameOf(text(i), 1);
    expect(names.size).toBe(2);
    expect(names.nameOf(text(0), 1)).toBeDefined();
    expect(names.nameOf(text(1), 1)).toBeDefined();
    expect(names.nameOf(text(2), 1)).toBeUndefined();
    expect(names.nameOf(text(3), 1)).toBeUndefined();
  });
});

/**
 * The PostgreSQL store runs its repeated statement texts as named prepared statements (issue 11).
 * Units here run one after another, so each takes the connection the previous one released
 * (the pool hands out its most recently released connection): one backend until it is replaced.
 */
describe('prepared statements [postgres]', () => {
  let db: TestStore;
  let admin: Client;
  const lookup = `SELECT id, v FROM prepared_t WHERE id = $1`;
  beforeEach(async () => {
    db = await openTestStore('postgres', 2);
    await db.store.unitOfWork('test.setup', (tx) => tx.query(`CREATE TABLE prepared_t (id INT PRIMARY KEY, v TEXT)`));
    await db.store.unitOfWork('test.setup', (tx) => tx.query(`INSERT INTO prepared_t (id, v) VALUES (1, 'a'), (2, 'b')`));
    admin = new Client({ connectionString: testDatabaseUrl() });
    await admin.connect();
  });
  afterEach(async () => {
    await admin?.end();
    await db?.dispose();
  });

  /** The statements prepared on the connection of the unit that asks, by text. */
  const preparedHere = (text: string) =>
    db.store.read('test.prepared', async (tx) => Number((await tx.query<{ n: string }>(`SELECT COUNT(*) AS n FROM pg_prepared_statements WHERE statement = $1`, [text]))[0].n));
  const backendPid = () => db.store.read('test.pid', async (tx) => Number((await tx.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`))[0].pid));
  const get = (id: number) => db.store.read('test.get', (tx) => tx.query<{ id: number; v: string }>(lookup, [id]));

  it('a repeated text is prepared once on its connection and answers with each execution’s values', async () => {
    expect(await get(1)).toEqual([{ id: 1, v: 'a' }]);
    expect(await preparedHere(lookup)).toBe(0);
    expect(await get(2)).toEqual([{ id: 2, v: 'b' }]);
    expect(await preparedHere(lookup)).toBe(1);
    expect(await get(1)).toEqual([{ id: 1, v: 'a' }]);
    expect(await preparedHere(lookup)).toBe(1);
  });

  it('a text with more parameters than the maximum is never prepared', async () => {
    const ids = Array.from({ length: PREPARED_STATEMENT_MAX_PARAMETERS + 1 }, (_v, i) => i + 1);
    const list = `SELECT id FROM prepared_t WHERE id IN (${placeholders(1, ids.length)}) ORDER BY id`;
    for (let i = 0; i < 3; i += 1) expect(await db.store.read('test.list', (tx) => tx.query(list, ids))).toEqual([{ id: 1 }, { id: 2 }]);
    expect(await preparedHere(list)).toBe(0);
  });

  it('a statement prepared in a unit that rolled back stays usable', async () => {
    await get(1);
    await expect(
      db.store.unitOfWork('test.rollback', async (tx) => {
        await tx.query(`SELECT 1 AS one`); // a unit's first statement goes with its BEGIN, as literals
        await tx.query(`UPDATE prepared_t SET v = 'x' WHERE id = $1`, [1]);
        await tx.query(`UPDATE prepared_t SET v = 'x' WHERE id = $1`, [2]); // named here, inside the transaction
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await preparedHere(`UPDATE prepared_t SET v = 'x' WHERE id = $1`)).toBe(1);
    await db.store.unitOfWork('test.again', (tx) => tx.query(`UPDATE prepared_t SET v = 'x' WHERE id = $1`, [1]));
    expect(await get(1)).toEqual([{ id: 1, v: 'x' }]);
    expect(await get(2)).toEqual([{ id: 2, v: 'b' }]);
  });

  it('after its connection is cut (a reconnect, a server restart) a named text is prepared again on the new connection', async () => {
    await get(1);
    await get(1);
    const before = await backendPid();
    await admin.query(`SELECT pg_terminate_backend($1)`, [before]);
    // The pool learns of the cut when the dead connection errors; a unit on it fails, the next gets a new one.
    const deadline = Date.now() + 10_000;
    let rows: unknown;
    for (;;) {
      try {
        rows = await get(2);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
    }
    expect(rows).toEqual([{ id: 2, v: 'b' }]);
    expect(await backendPid()).not.toBe(before);
    expect(await preparedHere(lookup)).toBe(1);
    expect(await get(1)).toEqual([{ id: 1, v: 'a' }]);
  });

  it('a statement whose result columns another process changed fails once, and its connection is replaced', async () => {
    const all = `SELECT * FROM prepared_t WHERE id = $1`;
    const getAll = (id: number) => db.store.read('test.all', (tx) => tx.query(all, [id]));
    await getAll(1);
    expect(await getAll(1)).toEqual([{ id: 1, v: 'a' }]);
    const before = await backendPid();
    await admin.query(`ALTER TABLE "${await schemaOf()}".prepared_t ADD COLUMN w TEXT DEFAULT 'new'`);
    await expect(getAll(1)).rejects.toThrow('cached plan must not change result type');
    expect(await getAll(1)).toEqual([{ id: 1, v: 'a', w: 'new' }]);
    expect(await backendPid()).not.toBe(before);
  });

  const schemaOf = () => db.store.read('test.schema', async (tx) => String((await tx.query<{ s: string }>(`SELECT current_schema() AS s`))[0].s));
});
