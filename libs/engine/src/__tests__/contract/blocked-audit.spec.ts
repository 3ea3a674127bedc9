import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { JobAssignment, StepResult } from '@ironflow/contracts';
import { StreamEngineMessage } from '@ironflow/engine';
import { slotsFor } from '@ironflow/follow-up';
import { STORES, TestEngine, openTestEngine, waitFor, waitForAdmission } from '@ironflow/testing';
import { auditRows, auditWriteFailures, pollOne, readRun, readStep, watchFrames } from './post-commit-kit';

/**
 * Contract tests of the specification "A stuck store cannot take the pool" and "Two kinds of row
 * on the way to an outcome" (issue 10 item 2): what a stuck audit table delays on each path.
 * Audit inserts are blocked with the "block audit insert" hook behind the sink port (`t.audit`).
 */
const BUDGET = 60_000;

/** What the push endpoint answers: a completion with one step, a failure, or a transport failure (HTTP 500). */
type PushAnswer = 'completed' | 'failed' | 'http-500';

describe.each(STORES)('blocked audit [%s]', (dialect) => {
  const SLOTS = slotsFor(dialect, 8);
  let t: TestEngine;
  let endpoint: Server;
  let answer: PushAnswer = 'completed';
  let pushUrl = '';

  beforeEach(async () => {
    answer = 'completed';
    t = await openTestEngine(dialect, { auditBudgetMs: BUDGET, followUpDrainMs: 1000, dispatchPollMs: 20 }, { bus: 'in-process' });
    endpoint = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const runId = String(JSON.parse(body).run_id);
        if (answer === 'http-500') {
          res.statusCode = 500;
          res.end('endpoint down');
          return;
        }
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(answer === 'completed'
          ? { status: 'completed', result: { pushed: runId }, steps: [stepOf(runId, 'charge')] }
          : { status: 'failed', error: { message: 'declined', retryable: false }, steps: [] }));
      });
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    pushUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/`;
  });
  afterEach(async () => {
    t.audit.unblock();
    await t.close();
    await new Promise((resolve) => endpoint.close(resolve));
  });

  const once = { maxAttempts: 1, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 300_000 };
  const failures = (eventType?: string) => auditWriteFailures(t, eventType);
  const frames = (runId: string) => watchFrames(t, runId);
  const fenceOf = (job: JobAssignment) => ({ execution_seq: job.execution_seq, lease_token: job.lease_token });
  const history = async (runId: string) => (await t.engine.api.getRunSteps(t.scope, runId)).history.map((h) => h.eventType);

  /** A pull parent (`recording: true`) that invokes `child` and is woken by it; returns both ids. */
  const parentInvoking = async (child: string, options: { drained?: boolean } = {}) => {
    await t.engine.api.registerFunction(t.scope, { id: 'parent', mode: 'pull', recording: true, retry: once });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['parent', 'child'] });
    const parentId = (await t.engine.triggers.invoke(t.scope, 'parent', {})).id;
    const job = await pollOne(t.engine, parentId);
    const stepId = `${parentId}:child:0`;
    await t.engine.pull.update('w1', job.job_id, { status: 'yielded', yield: { type: 'invoke_function', step_id: stepId, function_id: child, input: { n: 1 } }, ...fenceOf(job) });
    const childId = (await readStep(t, parentId, stepId))!.childRunId!;
    await waitForAdmission(t, childId);
    if (options.drained !== false) await t.engine.resources.followUps.drain(5000);
    return { parentId, childId, stepId };
  };

  describe.each(['completed', 'failed', 'http-500'] as const)('TestPostCommit_BlockedAuditDoesNotDelayRunOutcome (push)', (how) => {
    it(`TestPostCommit_BlockedAuditDoesNotDelayRunOutcome: a push ${how === 'completed' ? 'completion' : how === 'failed' ? 'failure' : 'transport failure'} returns, sends its frame and wakes its parent at once with audit writes stuck; the row lands once the table recovers`, async () => {
      await t.engine.api.registerFunction(t.scope, { id: 'child', mode: 'push', endpointUrl: pushUrl, retry: once });
      const { parentId, childId, stepId } = await parentInvoking('child');
      answer = how;
      const f = frames(childId);
      t.audit.block();
      t.engine.start({ pushDispatch: true, scheduler: false });
      await waitFor('the frame', () => f.seen.length === 1 || undefined);
      const status = how === 'completed' ? 'completed' : 'failed';
      expect(await readRun(t, childId)).toMatchObject({ status });
      await waitFor('the parent woken', async () => (await readStep(t, parentId, stepId))?.status === status || undefined);
      await waitFor('the status row waiting on the table', () => t.audit.waiting >= 1 || undefined);
      expect(await auditRows(t, childId, 'run.status_changed')).toBe(0);
      f.stop();
      t.audit.unblock();
      await waitFor('the row landed', async () => (await auditRows(t, childId, 'run.status_changed')) === 1 || undefined);
      expect(await failures()).toBe(0);
    });
  });

  it('TestPostCommit_BlockedAuditDoesNotDelayRunOutcome: an invoke failure (a pull parent failed by its failed child) returns and sends both frames with audit writes stuck; the rows land once the table recovers', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'child', mode: 'pull', retry: once });
    const { parentId, childId } = await parentInvoking('child');
    const childJob = await pollOne(t.engine, childId);
    const parentFrames = frames(parentId);
    const childFrames = frames(childId);
    t.audit.block();
    await t.engine.pull.update('w1', childJob.job_id, { status: 'failed', error: { message: 'declined', retryable: false }, ...fenceOf(childJob) });
    await waitFor('the child frame', () => childFrames.seen.length === 1 || undefined);
    await waitFor('the parent frame', () => parentFrames.seen.length === 1 || undefined);
    expect(await readRun(t, parentId)).toMatchObject({ status: 'failed', error: { code: 'INVOKE_FAILED' } });
    expect(await auditRows(t, parentId, 'run.status_changed')).toBe(0);
    parentFrames.stop();
    childFrames.stop();
    t.audit.unblock();
    await waitFor('the rows landed', async () => (await auditRows(t, parentId, 'run.status_changed')) === 1 && (await auditRows(t, childId, 'run.status_changed')) === 1 || undefined);
    expect(await failures()).toBe(0);
  });

  describe.each(['pull', 'push'] as const)('TestPostCommit_BlockedStepAuditDelaysTheReport', (mode) => {
    it(`TestPostCommit_BlockedStepAuditDelaysTheReport: on ${mode}, a stuck step row of a function that records steps holds the report's commit and its frame until the row clears; the rows land in order`, async () => {
      await t.engine.api.registerFunction(t.scope, mode === 'push'
        ? { id: 'recorded', mode: 'push', endpointUrl: pushUrl, recording: true, retry: once }
        : { id: 'recorded', mode: 'pull', recording: true, retry: once });
      await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['recorded'] });
      const runId = (await t.engine.triggers.invoke(t.scope, 'recorded', {})).id;
      await waitFor('the run.created row', async () => (await auditRows(t, runId, 'run.created')) === 1 || undefined);
      const f = frames(runId);
      t.audit.block((row) => row.eventType.startsWith('step.'));
      let returned = false;
      let reporting: Promise<unknown> = Promise.resolve();
      if (mode === 'pull') {
        const job = await pollOne(t.engine, runId);
        reporting = t.engine.pull.update('w1', job.job_id, { status: 'completed', output: { ok: 1 }, steps: [stepOf(runId, 'charge')], ...fenceOf(job) }).finally(() => (returned = true));
      } else {
        t.engine.start({ pushDispatch: true, scheduler: false });
      }
      await waitFor('the step row waiting on the table', () => t.audit.waiting === 1 || undefined);
      // Held: the report has not returned, the run is not committed, no frame went out.
      expect(returned).toBe(false);
      expect(await readRun(t, runId)).toMatchObject({ status: 'running' });
      expect(f.seen).toHaveLength(0);
      t.audit.unblock();
      await reporting;
      await waitFor('the frame', () => f.seen.length === 1 || undefined);
      f.stop();
      expect(await readRun(t, runId)).toMatchObject({ status: 'completed' });
      await waitFor('the status row', async () => (await auditRows(t, runId, 'run.status_changed')) === 1 || undefined);
      expect(await history(runId)).toEqual(['run.created', 'step.completed', 'run.status_changed']);
      expect(await failures()).toBe(0);
    });
  });

  it('the run_lifecycle profile records no step rows, the all profile records each saved step', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'lifecycle', mode: 'pull', retry: once });
    await t.engine.api.registerFunction(t.scope, { id: 'everything', mode: 'pull', recording: true, retry: once });
    await t.engine.pull.register(t.scope, 'w1', { worker_id: 'w1', function_ids: ['lifecycle', 'everything'] });
    for (const fn of ['lifecycle', 'everything']) {
      const runId = (await t.engine.triggers.invoke(t.scope, fn, {})).id;
      const job = await pollOne(t.engine, runId);
      await t.engine.pull.update('w1', job.job_id, { status: 'progress', steps: [stepOf(runId, 'one')], ...fenceOf(job) });
      await t.engine.pull.update('w1', job.job_id, { status: 'failed', error: { message: 'no', retryable: false }, steps: [{ ...stepOf(runId, 'two'), status: 'failed', error: { message: 'two failed' } }], ...fenceOf(job) });
      await t.engine.resources.followUps.drain(5000);
    }
    const runs = (await t.engine.api.listRuns(t.scope, {})).runs;
    const idOf = (fn: string) => runs.find((r) => r.functionId === fn)!.id;
    expect(await history(idOf('lifecycle'))).toEqual(['run.created', 'run.status_changed']);
    expect(await history(idOf('everything'))).toEqual(['run.created', 'step.completed', 'step.failed', 'run.status_changed']);
    expect(await failures()).toBe(0);
  });

  it('TestPostCommit_ParentWakeAuditTakesASlot: a parent wake writes its invoke step row through a recorder slot, after it resumed the parent, which does not wait for the row', async () => {
    await t.engine.api.registerFunction(t.scope, { id: 'child', mode: 'pull', retry: once });
    const { parentId, childId, stepId } = await parentInvoking('child');
    const childJob = await pollOne(t.engine, childId);
    t.audit.block();
    // Every slot of the recorder taken by stuck rows: the wake's row has to wait for one.
    const holders = Array.from({ length: SLOTS }, (_, i) => t.engine.resources.audit.record({ project: t.scope.project, env: t.scope.env, runId: `holder-${i}`, functionId: null, eventType: 'run.created' }));
    await waitFor('every slot taken', () => t.audit.waiting === SLOTS || undefined);
    await t.engine.pull.update('w1', childJob.job_id, { status: 'completed', output: { charged: 42 }, ...fenceOf(childJob) });
    await waitFor('the invoke step finished', async () => (await readStep(t, parentId, stepId))?.status === 'completed' || undefined);
    // The parent resumed: its next segment reaches the worker while its step row still waits for a slot.
    const resumed = await waitFor('the parent resumed', async () => (await t.engine.pull.poll('w1', 1)).find((j) => j.run_id === parentId));
    expect(resumed.run_id).toBe(parentId);
    expect(t.audit.waiting).toBe(SLOTS);
    expect(t.audit.maxWaiting).toBe(SLOTS);
    expect(t.engine.resources.audit.inFlight).toBeGreaterThan(SLOTS);
    expect(await auditRows(t, parentId, 'step.completed')).toBe(0);
    t.audit.unblock();
    expect(await Promise.all(holders)).toEqual(Array(SLOTS).fill(true));
    await waitFor('the step row landed', async () => (await auditRows(t, parentId, 'step.completed')) === 1 || undefined);
    expect(await failures()).toBe(0);
  });
  if (dialect === 'sqlite') {
    /** A streaming worker: its connection, and the jobs the engine pushed to it. */
    const openStream = async (functionIds: string[]) => {
      const jobs: JobAssignment[] = [];
      const conn = await t.engine.streams.open(t.scope, { worker_id: 's1', function_ids: functionIds }, {
        send: (m: StreamEngineMessage) => { if (m.kind === 'job') jobs.push(m.job); },
        end: () => undefined,
      });
      return { conn, jobs };
    };
    type Path = { child: 'pull' | 'push'; how: 'completed' | 'failed' | 'http-500' | 'invoke-failed' };
    const paths: Record<string, Path> = {
      'pull completion': { child: 'pull', how: 'completed' },
      'pull failure': { child: 'pull', how: 'failed' },
      'push completion': { child: 'push', how: 'completed' },
      'push failure': { child: 'push', how: 'failed' },
      'push transport failure': { child: 'push', how: 'http-500' },
      'invoke failure': { child: 'pull', how: 'invoke-failed' },
    };
    it.each(Object.keys(paths))('TestPostCommit_OutcomeAuditOutlivesTheCaller: %s: the caller goes away (the stream closes, the dispatcher stops) with the row stuck, and the row still lands', async (name) => {
      const path = paths[name];
      await t.engine.api.registerFunction(t.scope, path.child === 'push'
        ? { id: 'child', mode: 'push', endpointUrl: pushUrl, retry: once }
        : { id: 'child', mode: 'pull', retry: once });
      const { parentId, childId } = await parentInvoking('child');
      // The run whose status row the test follows: the child, or for an invoke failure the parent it fails.
      const ended = path.how === 'invoke-failed' ? parentId : childId;
      const f = frames(ended);
      t.audit.block();
      if (path.child === 'push') {
        answer = path.how as PushAnswer;
        t.engine.start({ pushDispatch: true, scheduler: false });
        await waitFor('the frame', () => f.seen.length === 1 || undefined);
        await t.engine.push.stop(0);
      } else {
        const worker = await openStream(['child']);
        const job = await waitFor('the child delivered on the stream', () => worker.jobs.find((j) => j.run_id === childId));
        const fence = { executionSeq: job.execution_seq, leaseToken: job.lease_token };
        await worker.conn.report(job.job_id, fence, path.how === 'completed'
          ? { kind: 'completed', output: { charged: 42 } }
          : { kind: 'failed', error: { message: 'declined', retryable: false } });
        worker.conn.close();
        await waitFor('the frame', () => f.seen.length === 1 || undefined);
      }
      f.stop();
      await waitFor('the row stuck', async () => t.audit.waiting > 0 || undefined);
      expect(await auditRows(t, ended, 'run.status_changed')).toBe(0);
      t.audit.unblock();
      await waitFor('the row landed', async () => (await auditRows(t, ended, 'run.status_changed')) === 1 || undefined);
      expect(await failures()).toBe(0);
    });
  }
});

function stepOf(runId: string, name: string): StepResult {
  return { id: `${runId}:${name}:0`, name, type: 'invoke', status: 'completed', output: { ok: true } };
}
