import { parseEnvironment } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';

describe('environment names', () => {
  it('accepts subject-safe names and defaults blank ones', () => {
    expect(parseEnvironment(undefined)).toBe('default');
    expect(parseEnvironment('  ')).toBe('default');
    expect(parseEnvironment('staging-2')).toBe('staging-2');
  });
  it.each(['a.b', 'sp ace', '*', 'x>', 'x'.repeat(65)])('rejects %j with VALIDATION_ERROR', (env) => {
    expect(() => parseEnvironment(env)).toThrow(expect.objectContaining({ code: 'VALIDATION_ERROR' }));
  });
});

describe.each(STORES)('input hardening [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await t.engine.api.registerFunction(SCOPE, { id: 'f', mode: 'pull', triggers: [{ event: 'go' }] });
    await t.engine.pull.register(SCOPE, 'w1', { worker_id: 'w1', function_ids: ['f'] });
    await t.engine.pull.register(SCOPE, 'w2', { worker_id: 'w2', function_ids: ['f'] });
  });
  afterEach(() => t.close());

  const runCount = async () => (await t.engine.api.listRuns(SCOPE, {})).totalCount;

  it('rejects event data nested deeper than 64 levels (even 5000) without writing anything', async () => {
    for (const depth of [65, 5000]) {
      let data: unknown = 1;
      for (let i = 0; i < depth; i += 1) data = { d: data };
      await expect(t.engine.api.trigger(SCOPE, { event: 'go', data })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    expect(await runCount()).toBe(0);
  });

  it('rejects an event name over 256 characters and an idempotency key over 512', async () => {
    await expect(t.engine.api.trigger(SCOPE, { event: 'e'.repeat(257), data: {} })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    await expect(t.engine.api.trigger(SCOPE, { event: 'go', data: {}, idempotencyKey: 'k'.repeat(513) })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    expect(await runCount()).toBe(0);
  });

  it('rejects a heartbeat whose jobs are not a list of job ids', async () => {
    for (const jobs of [5, { a: 1 }, 'abc']) {
      await expect(t.engine.pull.heartbeat('w1', { worker_id: 'w1', jobs } as never)).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    }
  });

  it('lets only the worker a job was handed to ack it or extend its lease', async () => {
    await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const [job] = await t.engine.pull.poll('w1', 1);
    const fence = { execution_seq: job.execution_seq, lease_token: job.lease_token };
    await expect(t.engine.pull.ack('w2', job.job_id, fence)).rejects.toMatchObject({ code: 'STALE_EXECUTION' });
    const lease = async () => (await t.db.store.read('t', (tx) => tx.query<{ expires_at: unknown; holder: string }>(`SELECT expires_at, holder FROM leases WHERE run_id = $1`, [job.run_id])))[0];
    const before = await lease();
    t.db.clock.advance(1000);
    await t.engine.pull.heartbeat('w2', { worker_id: 'w2', jobs: [{ job_id: job.job_id }] });
    expect(await lease()).toEqual(before);
    await t.engine.pull.heartbeat('w1', { worker_id: 'w1', jobs: [{ job_id: job.job_id }] });
    expect(Number((await lease()).expires_at)).toBeGreaterThan(Number(before.expires_at));
    await t.engine.pull.ack('w1', job.job_id, fence);
    expect((await lease()).holder).toBe('w1');
  });

  it('rejects a register whose labels.env cannot stand in a subject', async () => {
    await expect(t.engine.pull.register(SCOPE, 'w3', { worker_id: 'w3', function_ids: ['f'], labels: { env: 'a.b' } })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});

describe.each(STORES)('cancelling a parent [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect, { followUpDrainMs: 1000 });
    await t.engine.api.registerFunction(SCOPE, { id: 'parent', mode: 'pull', triggers: [{ event: 'go' }] });
    await t.engine.api.registerFunction(SCOPE, { id: 'child', mode: 'pull' });
    await t.engine.pull.register(SCOPE, 'w1', { worker_id: 'w1', function_ids: ['parent', 'child'] });
  });
  afterEach(() => t.close());

  it('cancels the child it waits on through step.invoke, but not a fire-and-forget child', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const parentId = runIds[0];
    const [job] = await t.engine.pull.poll('w1', 1);
    const fence = { execution_seq: job.execution_seq, lease_token: job.lease_token };
    await t.engine.pull.update('w1', job.job_id, { status: 'yielded', yield: { type: 'invoke_function_async', step_id: `${parentId}:child:0`, function_id: 'child' }, ...fence });
    // The fire-and-forget parent resumes once its child is admitted.
    await t.engine.resources.followUps.drain(5000);
    const [again] = (await t.engine.pull.poll('w1', 5)).filter((j) => j.run_id === parentId);
    await t.engine.pull.update('w1', again.job_id, { status: 'yielded', yield: { type: 'invoke_function', step_id: `${parentId}:child:1`, function_id: 'child' }, execution_seq: again.execution_seq, lease_token: again.lease_token });
    // The awaited child's admission runs after the report: let it finish, or it can find the parent
    // already cancelled and end the child itself ("parent-ended: no parent waits on run ...").
    expect(await t.engine.resources.followUps.drain(20_000)).toBe(true);
    const { children } = await t.engine.api.getRunSteps(SCOPE, parentId);
    const awaited = children.find((c) => c.parentStepId === `${parentId}:child:1`)!;
    const detached = children.find((c) => c.parentStepId === `${parentId}:child:0`)!;

    expect(await t.engine.api.cancelRun(SCOPE, parentId, 'order withdrawn')).toMatchObject({ status: 'cancelled' });
    await t.engine.resources.followUps.drain(5000);
    expect(await t.engine.api.getRun(SCOPE, awaited.id)).toMatchObject({ status: 'cancelled', error: { message: `parent run ${parentId} was cancelled` } });
    // The fire-and-forget child runs on (this test's poll may have claimed it).
    expect(['waiting_for_capacity', 'running']).toContain((await t.engine.api.getRun(SCOPE, detached.id)).status);
  });
});
