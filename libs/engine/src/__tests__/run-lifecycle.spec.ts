import { EngineError, JobAssignment } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';

/** Drives one pull worker by hand: register, poll, and the fenced reports of DESIGN.md. */
async function pollOne(t: TestEngine, workerId = 'w1'): Promise<JobAssignment> {
  const jobs = await t.engine.pull.poll(workerId, 1);
  expect(jobs).toHaveLength(1);
  return jobs[0];
}

describe.each(STORES)('run lifecycle and fencing [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await t.engine.api.registerFunction(SCOPE, { id: 'greet', mode: 'pull', triggers: [{ event: 'user.signed_up' }] });
    await t.engine.pull.register(SCOPE, 'w1', { worker_id: 'w1', function_ids: ['greet'] });
  });
  afterEach(() => t.close());

  it('moves waiting_for_capacity → running → completed with a fenced report', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'user.signed_up', data: { name: 'Ada' } });
    expect((await t.engine.api.getRun(SCOPE, runIds[0])).status).toBe('waiting_for_capacity');

    const job = await pollOne(t);
    expect(job).toMatchObject({ run_id: runIds[0], job_id: `${runIds[0]}-1`, execution_seq: 1, attempt: 1, completed_steps: [] });
    expect(job.event).toMatchObject({ name: 'user.signed_up', data: { name: 'Ada' } });
    expect((await t.engine.api.getRun(SCOPE, runIds[0])).status).toBe('running');

    await t.engine.pull.ack('w1', job.job_id, { execution_seq: 1, lease_token: job.lease_token });
    const result = await t.engine.pull.update('w1', job.job_id, {
      status: 'completed',
      output: { greeting: 'hello Ada' },
      steps: [{ id: `${job.run_id}:compose:0`, name: 'compose', type: 'invoke', status: 'completed', output: 'hello Ada' }],
      execution_seq: 1,
      lease_token: job.lease_token,
    });
    expect(result.effect).toBe('outcome');

    const run = await t.engine.api.getRun(SCOPE, runIds[0]);
    expect(run).toMatchObject({ status: 'completed', output: { greeting: 'hello Ada' }, attempt: 1 });
    const { steps } = await t.engine.api.getRunSteps(SCOPE, runIds[0]);
    expect(steps.map((s) => [s.name, s.status, s.output])).toEqual([['compose', 'completed', 'hello Ada']]);
    expect(await t.db.store.read('leases', (tx) => tx.query(`SELECT * FROM leases`))).toEqual([]);
  });

  it('rejects a stale token with STALE_EXECUTION and changes nothing', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'user.signed_up', data: {} });
    const job = await pollOne(t);
    const before = await t.engine.api.getRun(SCOPE, runIds[0]);

    const wrong = t.engine.pull.update('w1', job.job_id, { status: 'completed', output: 1, execution_seq: 1, lease_token: 'not-the-token' });
    await expect(wrong).rejects.toMatchObject({ code: 'STALE_EXECUTION', httpStatus: 409 });
    const missing = t.engine.pull.update('w1', job.job_id, { status: 'completed', output: 1 });
    await expect(missing).rejects.toMatchObject({ code: 'STALE_EXECUTION' });

    const after = await t.engine.api.getRun(SCOPE, runIds[0]);
    expect(after).toEqual(before);
  });

  it('answers a retried completion of a finished run with success and changes nothing', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'user.signed_up', data: {} });
    const job = await pollOne(t);
    const report = { status: 'completed' as const, output: { n: 1 }, execution_seq: 1, lease_token: job.lease_token };
    expect((await t.engine.pull.update('w1', job.job_id, report)).effect).toBe('outcome');
    const committed = await t.engine.api.getRun(SCOPE, runIds[0]);

    const retried = await t.engine.pull.update('w1', job.job_id, { ...report, output: { n: 2 } });
    expect(retried.effect).toBe('none');
    expect(await t.engine.api.getRun(SCOPE, runIds[0])).toEqual(committed);
  });

  it('answers RUN_NOT_RUNNING to a report for a run that was cancelled', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'user.signed_up', data: {} });
    const job = await pollOne(t);
    await t.engine.api.cancelRun(SCOPE, runIds[0], 'changed my mind');
    const late = t.engine.pull.update('w1', job.job_id, { status: 'completed', output: 1, execution_seq: 1, lease_token: job.lease_token });
    await expect(late).rejects.toBeInstanceOf(EngineError);
    await expect(late).rejects.toMatchObject({ code: 'RUN_NOT_RUNNING' });
    expect(await t.engine.api.getRun(SCOPE, runIds[0])).toMatchObject({ status: 'cancelled', error: { message: 'changed my mind', code: 'CANCELLED' } });
  });
});
