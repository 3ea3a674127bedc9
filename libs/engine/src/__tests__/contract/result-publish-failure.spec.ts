import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { JobAssignment, RunStatus } from '@ironflow/contracts';
import { STORES, TestEngine, isResultsSubject, openTestEngine, waitFor } from '@ironflow/testing';
import { metricValue } from './post-commit-kit';

/**
 * TestResultPublishFailurePolicyAtEveryDoor: every code path that ends a run, with every RESULTS
 * publish failing — the outcome is committed, `ironflow_run_result_publish_failures_total` counts
 * the lost frame, and a TriggerSync caller still gets the committed outcome from the store.
 */
describe.each(STORES)('TestResultPublishFailurePolicyAtEveryDoor [%s]', (dialect) => {
  let t: TestEngine;
  let endpoint: Server;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { dispatchPollMs: 20, followUpDrainMs: 1000 }, { bus: 'nats' });
    endpoint = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ status: 'completed', result: { pushed: JSON.parse(body).run_id }, steps: [] }));
      });
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    const port = (endpoint.address() as AddressInfo).port;
    const api = t.engine.api;
    await api.registerFunction(t.scope, { id: 'pulled', mode: 'pull', retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 }, triggers: [{ event: 'pull.go' }] });
    await api.registerFunction(t.scope, { id: 'pushed', mode: 'push', endpointUrl: `http://127.0.0.1:${port}/`, triggers: [{ event: 'push.go' }] });
    await api.registerFunction(t.scope, { id: 'child', mode: 'pull', retry: { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 } });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['pulled', 'child'] });
    t.bus.failPublishes(isResultsSubject);
  });
  afterEach(async () => {
    await t.close();
    await new Promise((resolve) => endpoint.close(resolve));
  });

  const nextJob = (fn: string): Promise<JobAssignment> =>
    waitFor(`a ${fn} job`, async () => (await t.engine.pull.poll('w1', 1)).find((j) => j.function_id === fn));
  const fenceOf = (job: JobAssignment) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });
  const yieldTo = (job: JobAssignment, y: object) => t.engine.pull.update('w1', job.job_id, { status: 'yielded', yield: y as never, ...fenceOf(job) });

  /** `endedRuns`: runs the door ends (each loses one frame); default 1. */
  type Door = { event: string; status: RunStatus; code?: string; endedRuns?: number; drive: () => Promise<void> };
  const doors: Record<string, () => Door> = {
    'pull completion': () => ({ event: 'pull.go', status: 'completed', drive: async () => {
      const job = await nextJob('pulled');
      await t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { ok: true }, ...fenceOf(job) });
    } }),
    'pull failure': () => ({ event: 'pull.go', status: 'failed', drive: async () => {
      const job = await nextJob('pulled');
      await t.engine.pull.update('w1', job.job_id, { status: 'failed', error: { message: 'boom', retryable: false }, ...fenceOf(job) });
    } }),
    'retries exhausted': () => ({ event: 'pull.go', status: 'failed', drive: async () => {
      const job = await nextJob('pulled');
      await t.engine.pull.update('w1', job.job_id, { status: 'failed', error: { message: 'flaky', retryable: true }, ...fenceOf(job) });
    } }),
    'push completion (dispatcher over HTTP)': () => ({ event: 'push.go', status: 'completed', drive: async () => {
      t.engine.start({ pushDispatch: true, scheduler: false });
    } }),
    'user cancel': () => ({ event: 'pull.go', status: 'cancelled', drive: async () => {
      const job = await nextJob('pulled');
      await t.engine.api.cancelRun(t.scope, job.run_id, 'stop it');
    } }),
    'parent failed by its failed child (pull, INVOKE_FAILED)': () => ({ event: 'pull.go', status: 'failed', code: 'INVOKE_FAILED', endedRuns: 2, drive: async () => {
      const parent = await nextJob('pulled');
      await yieldTo(parent, { type: 'invoke_function', step_id: `${parent.run_id}:child:0`, function_id: 'child' });
      const child = await nextJob('child');
      await t.engine.pull.update('w1', child.job_id, { status: 'failed', error: { message: 'declined', retryable: false }, ...fenceOf(child) });
    } }),
    'invoke timeout (pull; the child still queued is cancelled too)': () => ({ event: 'pull.go', status: 'failed', code: 'INVOKE_FAILED', endedRuns: 2, drive: async () => {
      const parent = await nextJob('pulled');
      await yieldTo(parent, { type: 'invoke_function', step_id: `${parent.run_id}:child:0`, function_id: 'child', invoke_timeout_ms: 1000 });
      t.db.clock.advance(2000);
      expect(await t.engine.scheduler.timeoutSweep()).toBe(1);
    } }),
    'waitForEvent timeout': () => ({ event: 'pull.go', status: 'failed', code: 'EVENT_WAIT_TIMED_OUT', drive: async () => {
      const job = await nextJob('pulled');
      await yieldTo(job, { type: 'wait_for_event', step_id: `${job.run_id}:approval:0`, event_filter: { event: 'approved', timeout: '1s' } });
      t.db.clock.advance(2000);
      expect(await t.engine.scheduler.timeoutSweep()).toBe(1);
    } }),
    'invoke of an unregistered function': () => ({ event: 'pull.go', status: 'failed', code: 'FUNCTION_NOT_FOUND', drive: async () => {
      const job = await nextJob('pulled');
      await yieldTo(job, { type: 'invoke_function', step_id: `${job.run_id}:ghost:0`, function_id: 'ghost' });
    } }),
  };

  it.each(Object.keys(doors))('TestResultPublishFailurePolicyAtEveryDoor: %s', async (name) => {
    const door = doors[name]();
    const sync = t.engine.api.triggerSync(t.scope, { event: door.event, data: {}, timeoutMs: 15_000 });
    await door.drive();
    const { results } = await sync;
    expect(results).toHaveLength(1);
    expect(results[0].status).toBe(door.status);
    if (door.code) expect(results[0].error?.code).toBe(door.code);
    const stored = await t.engine.api.getRun(t.scope, results[0].runId);
    expect(stored.status).toBe(door.status);
    await t.engine.resources.followUps.drain(5000);
    const lost = door.endedRuns ?? 1;
    expect(await metricValue(t.engine, 'ironflow_run_result_publish_failures_total')).toBe(lost);
    expect(t.bus.attempts.filter((a) => isResultsSubject(a.subject) && a.failed)).toHaveLength(lost);
  });
});

describe.each(STORES)('InvokeFunctionSync [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect, { followUpDrainMs: 1000 }, { bus: 'nats' });
    await t.engine.api.registerFunction(t.scope, { id: 'adder', mode: 'pull' });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['adder'] });
  });
  afterEach(() => t.close());

  const answer = async () => {
    const job = await waitFor('the adder job', async () => (await t.engine.pull.poll('w1', 1))[0]);
    const { a, b } = job.event.data as { a: number; b: number };
    await t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { sum: a + b }, execution_seq: job.execution_seq, lease_token: job.lease_token });
    return job;
  };

  it('starts one run of the function with the input as event data and returns its outcome', async () => {
    const [result, job] = await Promise.all([t.engine.api.invokeFunctionSync(t.scope, { functionId: 'adder', input: { a: 2, b: 3 }, timeoutMs: 10_000 }), answer()]);
    expect(result).toMatchObject({ runId: job.run_id, functionId: 'adder', status: 'completed', output: { sum: 5 } });
    expect(job.event).toMatchObject({ name: 'ironflow/function.invoked', data: { a: 2, b: 3 } });
  });

  it('returns the committed outcome when every RESULTS frame is lost', async () => {
    t.bus.failPublishes(isResultsSubject);
    const [result] = await Promise.all([t.engine.api.invokeFunctionSync(t.scope, { functionId: 'adder', input: { a: 1, b: 1 }, timeoutMs: 10_000 }), answer()]);
    expect(result).toMatchObject({ status: 'completed', output: { sum: 2 } });
  });

  it('rejects an unknown function with FUNCTION_NOT_FOUND and starts nothing', async () => {
    await expect(t.engine.api.invokeFunctionSync(t.scope, { functionId: 'nope', input: {} })).rejects.toMatchObject({ code: 'FUNCTION_NOT_FOUND' });
    expect((await t.engine.api.listRuns(t.scope, {})).totalCount).toBe(0);
  });
});
