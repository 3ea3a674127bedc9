import { AddressInfo } from 'node:net';
import { Server, createServer } from 'node:http';
import { PushRequest } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine, waitFor } from '@ironflow/testing';
import { readLeases, readRun, readSteps } from './engine-kit.test';

/**
 * The push dispatcher applies an endpoint's answer as a fenced report; "a transport failure
 * (refused, non-200, a body that is not a PushResponse) counts as a retryable failure of the
 * attempt with code PUSH_DISPATCH_FAILED" (push-dispatcher.ts). An answer the report system
 * refuses must not leave the run `running` with its lease held and no execution behind it: it
 * fails the attempt with REPORT_REJECTED, or PAYLOAD_TOO_LARGE (not retryable).
 *
 * Regression: push-dispatcher.ts `invoke` used to log and swallow a report the report system
 * rejected (VALIDATION_ERROR, PAYLOAD_TOO_LARGE), leaving the run `running` with its lease.
 *
 * Each test answers one POST from a local endpoint, then stops the dispatcher (which waits for
 * the invocation in flight), so the row is read after the answer was applied, with no sleep.
 */
describe.each(STORES)('push dispatch [%s]', (dialect) => {
  let t: TestEngine;
  let server: Server;
  let answer: { status: number; body: unknown } | ((request: PushRequest) => { status: number; body: unknown });
  let calls: unknown[];
  let endpoint: string;

  beforeEach(async () => {
    calls = [];
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        // Only the engine's push requests count: on a machine shared with other suites, a port this
        // server got may still be called by another process that used it before (a stray GET).
        if (req.method !== 'POST' || req.url !== '/api/ironflow') {
          res.writeHead(404).end();
          return;
        }
        const request = JSON.parse(body) as PushRequest;
        calls.push(request);
        const { status, body: answered } = typeof answer === 'function' ? answer(request) : answer;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answered));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    endpoint = `http://127.0.0.1:${port}/api/ironflow`;
    t = await openTestEngine(dialect, { dispatchPollMs: 20, maxPayloadBytes: 1024 });
    await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: endpoint, triggers: [{ event: 'push.started' }] });
    await t.engine.api.registerFunction(SCOPE, { id: 'pushed-child', mode: 'push', endpointUrl: endpoint });
  });
  afterEach(async () => {
    await t.close();
    await new Promise((resolve) => server.close(resolve));
  });

  /** Triggers one run, lets the dispatcher call the endpoint once, and stops it once the answer is applied. */
  async function dispatchOnce(): Promise<string> {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'push.started', data: { n: 1 } });
    t.engine.start({ pushDispatch: true, scheduler: false });
    await waitFor('the endpoint to be called', () => calls.length >= 1);
    await t.engine.push.stop(10_000);
    expect(calls).toHaveLength(1);
    return runIds[0];
  }

  it('applies a completed answer (harness check)', async () => {
    answer = { status: 200, body: { status: 'completed', result: { ok: 1 }, steps: [] } };
    const runId = await dispatchOnce();
    expect(await readRun(t, runId)).toMatchObject({ status: 'completed', output: { ok: 1 } });
    expect(await readLeases(t, runId)).toEqual([]);
  });

  it('a non-200 answer is a retryable PUSH_DISPATCH_FAILED failure', async () => {
    answer = { status: 503, body: { message: 'unavailable' } };
    const runId = await dispatchOnce();
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, error: { code: 'PUSH_DISPATCH_FAILED', retryable: true } });
    expect(await readLeases(t, runId)).toEqual([]);
  });

  it('a "yielded" answer without a yield is a retryable REPORT_REJECTED failure, not a run left running', async () => {
    answer = { status: 200, body: { status: 'yielded', steps: [] } };
    const runId = await dispatchOnce();
    expect(await readRun(t, runId)).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, error: { code: 'REPORT_REJECTED', retryable: true } });
    expect(await readLeases(t, runId)).toEqual([]);
  });

  it('an answer over maxPayloadBytes ends the attempt instead of leaving the run running', async () => {
    answer = { status: 200, body: { status: 'completed', result: { blob: 'x'.repeat(2000) }, steps: [] } };
    const runId = await dispatchOnce();
    const run = await readRun(t, runId);
    // Too large is deterministic: the run fails at once rather than spending its attempts.
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', retryable: false });
    expect(run.error?.message).toContain('bytes; the limit is');
    expect(await readLeases(t, runId)).toEqual([]);
  });
  it('a report whose steps the function\'s cached profile does not record reads no run before its commit (issue 11)', async () => {
    answer = { status: 200, body: { status: 'completed', result: { ok: 1 }, steps: [{ id: 's1', name: 'work', status: 'completed', output: 1 }] } };
    t.engine.start({ pushDispatch: true, scheduler: false });
    const first = await t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 1 }, timeoutMs: 10_000 });
    expect(first.results).toEqual([expect.objectContaining({ status: 'completed' })]);
    // The run_lifecycle profile (the default) is cached now: the step rows' read of the run is not needed.
    await waitFor('the profile to be cached', () => t.engine.resources.audit.skips(SCOPE.project, SCOPE.env, 'pushed', 'step.completed'));
    t.faults.fail({ unit: (name, kind) => kind === 'read' && name === 'readReportedRun' });
    const second = await t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 2 }, timeoutMs: 10_000 });
    expect(second.results).toEqual([expect.objectContaining({ status: 'completed', output: { ok: 1 } })]);
    expect(t.faults.failures).toEqual([]);
  });

  it('a push parent\'s invoke: the admission claims the child and the wake claims the parent, each at once (issue 11)', async () => {
    // The parent invokes `pushed-child` and completes with its output; the child completes at once.
    answer = (request) => {
      if (request.function_id === 'pushed-child') return { status: 200, body: { status: 'completed', result: { child: request.event.data }, steps: [] } };
      const invoked = request.steps.find((step) => step.id === 'call');
      if (invoked?.status === 'completed') return { status: 200, body: { status: 'completed', result: { parent: invoked.output }, steps: [] } };
      return { status: 200, body: { status: 'yielded', steps: [], yield: { type: 'invoke_function', step_id: 'call', function_id: 'pushed-child', input: { n: 7 } } } };
    };
    t.engine.start({ pushDispatch: true, scheduler: false });
    // Every claim of the dispatcher's loop fails: only the trigger, the admission and the wake can dispatch.
    t.faults.fail({ unit: (name) => name === 'claimSegments' });
    const { results } = await t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 7 }, timeoutMs: 10_000 });
    expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { parent: { child: { n: 7 } } } })]);
    expect(calls.map((call) => (call as PushRequest).function_id)).toEqual(['pushed', 'pushed-child', 'pushed']);
    const child = (calls[1] as PushRequest).run_id;
    expect(await readRun(t, child)).toMatchObject({ status: 'completed', parentRunId: results[0].runId, executionSeq: 1 });
    expect(await readLeases(t, child)).toEqual([]);
    expect(await readLeases(t, results[0].runId)).toEqual([]);
    // The invoke step's sequence follows the report's steps (none) without a read of the last one.
    expect(await readSteps(t, results[0].runId)).toEqual([expect.objectContaining({ stepId: 'call', type: 'invoke', status: 'completed', sequence: 0 })]);
  });

  describe('a sync trigger with a free push slot (claim at trigger, issue 11)', () => {
    it('claims its run in the trigger\'s own unit of work and dispatches it at once', async () => {
      answer = { status: 200, body: { status: 'completed', result: { ok: 2 }, steps: [] } };
      t.engine.start({ pushDispatch: true, scheduler: false });
      // Every claim of the dispatcher's loop fails: only the trigger's own claim can dispatch the run.
      t.faults.fail({ unit: (name) => name === 'claimSegments' });
      const { results } = await t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 2 }, timeoutMs: 10_000 });
      expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { ok: 2 } })]);
      expect(calls).toHaveLength(1);
      expect(await readLeases(t, results[0].runId)).toEqual([]);
    });

    it('a trigger whose statement fails gives its slot back; on PostgreSQL, a trigger of an event this node has seen claims its run as a one-statement unit', async () => {
      await t.close();
      t = await openTestEngine(dialect, { dispatchPollMs: 20, pushConcurrency: 1 });
      await t.engine.api.registerFunction(SCOPE, { id: 'pushed', mode: 'push', endpointUrl: endpoint, triggers: [{ event: 'push.started' }] });
      answer = { status: 200, body: { status: 'completed', result: { ok: 6 }, steps: [] } };
      t.engine.start({ pushDispatch: true, scheduler: false });
      // Every claim of the dispatcher's loop fails: with one slot, only a trigger holding it can dispatch.
      t.faults.fail({ unit: (name) => name === 'claimSegments' });
      const slotFree = () => waitFor('the one slot to be free', () => t.engine.push.reserve() && (t.engine.push.release(), true));
      expect((await t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 1 }, timeoutMs: 10_000 })).results).toEqual([expect.objectContaining({ status: 'completed' })]);
      await slotFree();

      // The trigger's first statement fails: on PostgreSQL the one statement, on SQLite the event's insert.
      const first = dialect === 'postgres' ? /^\s*WITH simple AS/ : /^\s*INSERT INTO events/;
      t.faults.fail({ query: (sql) => first.test(sql) }, 1);
      await expect(t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 2 }, timeoutMs: 10_000 })).rejects.toThrow('fault hook');
      expect(t.faults.failures.filter((f) => f.includes('trigger'))).toEqual([expect.stringMatching(dialect === 'postgres' ? /^statement in trigger: WITH simple AS/ : /^statement in trigger: INSERT INTO events/)]);

      const units = jest.spyOn(t.faults, 'unitOfWork');
      const { results } = await t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 3 }, timeoutMs: 10_000 });
      expect(results).toEqual([expect.objectContaining({ status: 'completed', output: { ok: 6 } })]);
      const triggers = units.mock.calls.filter(([name]) => name === 'trigger').map(([, , options]) => options);
      expect(triggers).toEqual(dialect === 'postgres' ? [{ oneStatement: true, lockLimitMs: t.engine.resources.config.lockLimitMs }] : [{ lockLimitMs: t.engine.resources.config.lockLimitMs }]);
      expect(calls).toHaveLength(2);
    });

    it('claims nothing while the instance is frozen: the run waits for the thaw, then the dispatcher runs it', async () => {
      answer = { status: 200, body: { status: 'completed', result: { ok: 5 }, steps: [] } };
      await t.engine.instance.freeze('admin', 'backup');
      t.engine.start({ pushDispatch: true, scheduler: false });
      const sync = await t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 5 }, timeoutMs: 300 });
      expect(sync.results).toEqual([expect.objectContaining({ status: 'waiting_for_capacity' })]);
      expect(calls).toHaveLength(0);
      expect(await readLeases(t, sync.results[0].runId)).toEqual([]);
      await t.engine.instance.thaw('admin');
      await waitFor('the run to complete after the thaw', async () => (await readRun(t, sync.results[0].runId)).status === 'completed');
      expect(calls).toHaveLength(1);
    });

    it('leaves the run to the dispatcher\'s claim when the trigger is not sync, and when this node does not dispatch push', async () => {
      answer = { status: 200, body: { status: 'completed', result: { ok: 3 }, steps: [] } };
      t.faults.fail({ unit: (name) => name === 'claimSegments' });
      const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'push.started', data: { n: 3 } });
      const sync = t.engine.api.triggerSync(SCOPE, { event: 'push.started', data: { n: 4 }, timeoutMs: 300 });
      expect((await sync).results).toEqual([expect.objectContaining({ status: 'waiting_for_capacity' })]);
      expect(calls).toHaveLength(0);
      t.faults.heal();
      t.engine.start({ pushDispatch: true, scheduler: false });
      await waitFor('both runs to complete', async () => (await Promise.all([runIds[0], (await sync).results[0].runId].map((id) => readRun(t, id)))).every((run) => run.status === 'completed'));
      expect(calls).toHaveLength(2);
    });
  });

  it('a stop whose drain ends with a push call still open returns without waiting for that call: the run keeps its lease for lease recovery (README "Shutdown")', async () => {
    // An endpoint that answers only when released (after the stop): the call outlives the drain.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered = 0;
    const holding = createServer((req, res) => {
      req.resume();
      entered += 1;
      void held.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'completed', result: { late: true }, steps: [] })));
    });
    await new Promise<void>((resolve) => holding.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(holding.address() as AddressInfo).port}/`;
      await t.engine.api.registerFunction(SCOPE, { id: 'held', mode: 'push', endpointUrl: url, triggers: [{ event: 'held.started' }] });
      const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'held.started', data: {} });
      t.engine.start({ pushDispatch: true, scheduler: false });
      await waitFor('the endpoint to hold the call', () => entered === 1);
      // Before the fix the stop waited for the push connection pool to close, i.e. for the call to end.
      await t.engine.stop(100);
      expect(await readRun(t, runIds[0])).toMatchObject({ status: 'running' });
      expect(await readLeases(t, runIds[0])).toHaveLength(1);
    } finally {
      release();
      holding.closeAllConnections();
      await new Promise((resolve) => holding.close(resolve));
    }
  });
});
