/**
 * An accepted `step.invoke` writes its child run, the parent's invoke step and the pending
 * invocation in one statement on PostgreSQL (issue 11), three on SQLite: the rows are those the
 * separate inserts write, and a repeated step row is skipped as `insertWaitStep` skips it.
 */
import { STORES, TestStore, openTestStore } from '@ironflow/testing';
import { NewRun, Statement, invokesSql, numberedTogether, runsSql, stepsSql } from '@ironflow/store';

describe('numberedTogether', () => {
  it('renumbers each statement\'s placeholders after the parameters of those before it', () => {
    const parts: Statement[] = [
      { sql: 'INSERT INTO a VALUES ($1, $2, $1)', params: ['x', 'y'] },
      { sql: 'INSERT INTO b VALUES ($2, $1)', params: [1, 2] },
      { sql: 'SELECT 1', params: [] },
      { sql: 'INSERT INTO c VALUES ($1)', params: [null] },
    ];
    expect(numberedTogether(parts)).toEqual({
      texts: ['INSERT INTO a VALUES ($1, $2, $1)', 'INSERT INTO b VALUES ($4, $3)', 'SELECT 1', 'INSERT INTO c VALUES ($5)'],
      params: ['x', 'y', 1, 2, null],
    });
  });
});

describe.each(STORES)('an invoked child and its links [%s]', (dialect) => {
  let db: TestStore;
  beforeEach(async () => {
    db = await openTestStore(dialect);
  });
  afterEach(() => db.dispose());

  const child = (id: string, parentStepId: string): NewRun => ({
    id, project: 'p', env: 'e', functionId: 'child-fn', functionVersion: 3, mode: 'push', eventId: null, maxAttempts: 4,
    input: { n: 1, text: 'é' }, parentRunId: 'parent', parentStepId, concurrencyKey: 'k', concurrencyLimit: 2, held: true,
  });

  it('writes the rows the separate inserts write and returns the child and the invocation', async () => {
    const { run, invoke } = await db.store.unitOfWork('accept', (tx) =>
      invokesSql.insertInvokedChild(
        tx,
        child('c1', 's1'),
        { runId: 'parent', stepId: 's1', name: 'call', type: 'invoke', status: 'waiting', childRunId: 'c1', timeoutAt: 5000, sequence: 2 },
        { parentRunId: 'parent', parentStepId: 's1', childRunId: 'c1', project: 'p', env: 'e', parentFunctionId: 'parent-fn', childFunctionId: 'child-fn', async: false },
      ),
    );
    // The same rows through the separate inserts, for comparison.
    await db.store.unitOfWork('separate', async (tx) => {
      await runsSql.insertRun(tx, child('c2', 's2'));
      await stepsSql.insertWaitStep(tx, { runId: 'parent', stepId: 's2', name: 'call', type: 'invoke', status: 'waiting', childRunId: 'c2', timeoutAt: 5000, sequence: 2 });
      await invokesSql.insertInvoke(tx, { parentRunId: 'parent', parentStepId: 's2', childRunId: 'c2', project: 'p', env: 'e', parentFunctionId: 'parent-fn', childFunctionId: 'child-fn', async: false });
    });
    const [stored, separate] = await db.store.read('read', async (tx) => [await runsSql.getRun(tx, 'c1'), await runsSql.getRun(tx, 'c2')]);
    expect(run).toEqual(stored);
    // Ids and store-clock times differ between the two units; every other column is the same.
    const withoutIds = (r: typeof stored) => ({ ...r!, id: '', parentStepId: '', availableAt: 0, createdAt: 0, updatedAt: 0 });
    expect(withoutIds(stored)).toEqual(withoutIds(separate));
    expect([run.status, run.held, run.input, run.concurrencyLimit]).toEqual(['waiting_for_capacity', true, { n: 1, text: 'é' }, 2]);
    expect(invoke).toEqual(await db.store.read('invoke', (tx) => invokesSql.getInvoke(tx, 'parent', 's1')));
    expect([invoke.childRunId, invoke.async, invoke.createdRow, invoke.settledAt]).toEqual(['c1', false, false, null]);
    const steps = await db.store.read('steps', (tx) => stepsSql.listSteps(tx, 'parent'));
    expect(steps.map((s) => [s.stepId, s.type, s.status, s.childRunId, s.timeoutAt, s.sequence])).toEqual([
      ['s1', 'invoke', 'waiting', 'c1', 5000, 2],
      ['s2', 'invoke', 'waiting', 'c2', 5000, 2],
    ]);
  });

  it('a fire-and-forget invoke\'s step is completed with the child\'s id, and a step row already there is kept', async () => {
    await db.store.unitOfWork('earlier', (tx) => stepsSql.insertWaitStep(tx, { runId: 'parent', stepId: 's9', name: 'earlier', type: 'invoke', status: 'waiting', childRunId: 'old', sequence: 0 }));
    await db.store.unitOfWork('accept', (tx) =>
      invokesSql.insertInvokedChild(
        tx,
        child('c3', 's3'),
        { runId: 'parent', stepId: 's3', name: 'fire', type: 'invoke', status: 'completed', childRunId: 'c3', output: { run_id: 'c3' }, sequence: 1 },
        { parentRunId: 'parent', parentStepId: 's3', childRunId: 'c3', project: 'p', env: 'e', parentFunctionId: 'parent-fn', childFunctionId: 'child-fn', async: true },
      ),
    );
    const { invoke } = await db.store.unitOfWork('repeat', (tx) =>
      invokesSql.insertInvokedChild(
        tx,
        child('c4', 's9'),
        { runId: 'parent', stepId: 's9', name: 'again', type: 'invoke', status: 'waiting', childRunId: 'c4', sequence: 5 },
        { parentRunId: 'parent', parentStepId: 's4', childRunId: 'c4', project: 'p', env: 'e', parentFunctionId: 'parent-fn', childFunctionId: 'child-fn', async: false },
      ),
    );
    expect(invoke.childRunId).toBe('c4');
    const steps = await db.store.read('steps', (tx) => stepsSql.listSteps(tx, 'parent'));
    expect(steps.map((s) => [s.stepId, s.name, s.status, s.childRunId, s.output])).toEqual([
      ['s9', 'earlier', 'waiting', 'old', undefined],
      ['s3', 'fire', 'completed', 'c3', { run_id: 'c3' }],
    ]);
    expect((await db.store.read('invoke', (tx) => invokesSql.getInvoke(tx, 'parent', 's3')))?.async).toBe(true);
  });
});
