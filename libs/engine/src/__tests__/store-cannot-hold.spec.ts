/**
 * Input the store cannot hold never leaves a run `running` and is refused the same on both stores
 * (issue 7 item 6): U+0000 in a name, id or key is a `VALIDATION_ERROR` on every route (today
 * PostgreSQL failed with a 500 and SQLite accepted it); REST registration applies the protobuf
 * `int32` ranges Connect applies; a terminal report carrying such a value fails its attempt with
 * a code; and a value PostgreSQL still refuses surfaces as `VALIDATION_ERROR`, not as a crash.
 */
import { EngineError } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, countRows, fenced, pollAndAck, ranStep, registerPull, registerWorker, snapshot } from './engine-kit.test';

const NUL = '\u0000';

async function codeOf(call: Promise<unknown>): Promise<string> {
  return call.then(
    () => 'resolved',
    (err: unknown) => {
      if (!(err instanceof EngineError)) throw err;
      return err.code;
    },
  );
}

describe.each(STORES)('values the store cannot hold [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'f', triggers: [{ event: 'go' }], concurrency: { limit: 5, key: 'data.tenant' } });
    await registerWorker(t, ['f']);
  });
  afterEach(() => t.close());

  it('U+0000 in an event name, idempotency key, concurrency or debounce key value: VALIDATION_ERROR, nothing written', async () => {
    expect(await codeOf(t.engine.api.trigger(SCOPE, { event: `go${NUL}`, data: {} }))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.api.trigger(SCOPE, { event: 'go', data: {}, idempotencyKey: `k${NUL}` }))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.api.trigger(SCOPE, { event: 'go', data: { tenant: `t${NUL}` } }))).toBe('VALIDATION_ERROR');
    await t.engine.api.registerFunction(SCOPE, { id: 'd', mode: 'pull', triggers: [{ event: 'typed' }], debounce: { periodMs: 1000, key: 'user' } });
    expect(await codeOf(t.engine.api.trigger(SCOPE, { event: 'typed', data: { user: `u${NUL}` } }))).toBe('VALIDATION_ERROR');
    expect(await countRows(t, 'events')).toBe(0);
    // In event data, which is stored as JSON, it is kept.
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'go', data: { note: `a${NUL}b` } });
    expect((await t.engine.api.getRun(SCOPE, runIds[0])).input).toEqual({ note: `a${NUL}b` });
  });

  it('U+0000 anywhere in a registration: VALIDATION_ERROR naming where, nothing registered', async () => {
    for (const input of [
      { id: 'g', name: `n${NUL}` },
      { id: 'g', triggers: [{ event: `e${NUL}` }] },
      { id: 'g', description: `d${NUL}` },
      { id: 'g', metadata: { [`k${NUL}`]: 1 } },
    ]) {
      await expect(t.engine.api.registerFunction(SCOPE, { mode: 'pull', ...input })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining('U+0000') });
    }
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).toEqual(['f']);
  });

  it('U+0000 in a run id or function id of a read, a cancel or an invoke: VALIDATION_ERROR', async () => {
    expect(await codeOf(t.engine.api.getRun(SCOPE, `r${NUL}`))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.api.getRunSteps(SCOPE, `r${NUL}`))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.api.cancelRun(SCOPE, `r${NUL}`, 'x'))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.api.listRuns(SCOPE, { functionId: `f${NUL}` }))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.api.invokeFunctionSync(SCOPE, { functionId: `f${NUL}`, input: {} }))).toBe('VALIDATION_ERROR');
  });

  it('U+0000 in a worker id, a served function id, a hostname or a job id: VALIDATION_ERROR on every worker route', async () => {
    const bad = `w${NUL}`;
    expect(await codeOf(t.engine.pull.register(SCOPE, bad, { worker_id: bad, function_ids: ['f'] }))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.pull.register(SCOPE, 'w2', { worker_id: 'w2', function_ids: [`f${NUL}`] }))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.pull.register(SCOPE, 'w2', { worker_id: 'w2', function_ids: ['f'], hostname: `h${NUL}` }))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.pull.heartbeat(bad, { worker_id: bad, jobs: [] }))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.pull.poll(bad, 1))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.pull.ack(WORKER, `r${NUL}-1`, {}))).toBe('VALIDATION_ERROR');
    expect(await codeOf(t.engine.pull.update(WORKER, `r${NUL}-1`, { status: 'completed' }))).toBe('VALIDATION_ERROR');
    // A heartbeat listing such a job id refreshes nothing and does not fail.
    expect(await codeOf(t.engine.pull.heartbeat(WORKER, { worker_id: WORKER, jobs: [{ job_id: `r${NUL}-1` }] }))).toBe('resolved');
  });

  it('REST registration applies the int32 ranges of Connect: initialDelayMs 1e19, maxDelayMs, timeoutMs or a concurrency limit past 2^31-1 is refused', async () => {
    for (const input of [
      { retry: { initialDelayMs: 1e19 } },
      { retry: { maxDelayMs: 2 ** 31 } },
      { timeoutMs: 2 ** 31 },
      { concurrency: { limit: 2 ** 31 } },
      { retry: { backoffFactor: Number.POSITIVE_INFINITY } },
    ]) {
      await expect(t.engine.api.registerFunction(SCOPE, { id: 'g', mode: 'pull', ...input } as never)).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    await t.engine.api.registerFunction(SCOPE, { id: 'g', mode: 'pull', retry: { maxAttempts: 2, backoffFactor: 2, initialDelayMs: 2 ** 31 - 1, maxDelayMs: 2 ** 31 - 1 }, timeoutMs: 2 ** 31 - 1 });
  });

  it('a completed report with U+0000 in a step id → VALIDATION_ERROR, and the attempt fails with REPORT_REJECTED (retryable) instead of staying running', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    const step = { ...ranStep(runId, 'a', 1), id: `${runId}:a${NUL}:0` };
    expect(await codeOf(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: 1, steps: [step] })))).toBe('VALIDATION_ERROR');
    const after = await snapshot(t, runId);
    expect(after.run).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, error: { code: 'REPORT_REJECTED', retryable: true } });
    expect(after.steps).toEqual([]);
    expect(after.leases).toEqual([]);
  });

  it('a failed report whose steps cannot be stored keeps its own error and retryability, without the steps', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    const step = { ...ranStep(runId, 'a', 1), name: `a${NUL}` };
    const report = fenced(job, { status: 'failed', error: { message: 'card declined', code: 'DECLINED', retryable: false }, steps: [step], step_offset: 0 });
    expect(await codeOf(t.engine.pull.update(WORKER, job.job_id, report))).toBe('VALIDATION_ERROR');
    const after = await snapshot(t, runId);
    expect(after.run).toMatchObject({ status: 'failed', error: { code: 'DECLINED', retryable: false } });
    expect(after.run.error?.message).toContain('card declined');
    expect(after.run.error?.message).toContain('its steps were not stored');
    expect(after.steps).toEqual([]);
  });

  it('a step_offset past the INTEGER sequence column is refused alike on both stores, failing the attempt', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const job = await pollAndAck(t);
    expect(await codeOf(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: 1, steps: [ranStep(runId, 'a', 1)], step_offset: 3e9 })))).toBe('VALIDATION_ERROR');
    expect((await snapshot(t, runId)).run).toMatchObject({ status: 'waiting_for_capacity', error: { code: 'REPORT_REJECTED' } });
  });

  it('a value the store itself refuses is a VALIDATION_ERROR (PostgreSQL data exception), never an unclassified failure', async () => {
    const read = t.db.store.read('test.nul', (tx) => tx.query(`SELECT CAST($1 AS TEXT) AS v`, [`a${NUL}`]));
    if (dialect === 'postgres') await expect(read).rejects.toMatchObject({ code: 'VALIDATION_ERROR', details: { sqlstate: expect.stringMatching(/^22/) } });
    else expect(await read).toEqual([{ v: `a${NUL}` }]);
  });
});
