import { EngineError } from '@ironflow/contracts';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, countRows, fenced, pollAndAck, readRun, registerPull, registerWorker, snapshot } from './engine-kit.test';

/**
 * Bad input through the engine API answers a stable error code (contracts `ERROR_HTTP_STATUS`)
 * and writes nothing ("none changes committed state when it throws", contracts client-api.ts).
 */
describe.each(STORES)('bad input [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect, { maxPayloadBytes: 1024 });
    await registerPull(t, { id: 'flow', triggers: [{ event: 'order.placed' }] });
    await registerWorker(t, ['flow']);
  });
  afterEach(() => t.close());

  async function codeOf(call: Promise<unknown>): Promise<{ code: string; httpStatus: number } | 'resolved'> {
    return call.then(
      () => 'resolved' as const,
      (err: unknown) => {
        if (!(err instanceof EngineError)) throw err;
        return { code: err.code, httpStatus: err.httpStatus };
      },
    );
  }

  it('RegisterFunction: a function id that is not a subject token, a push function without endpointUrl, or a bad retry → VALIDATION_ERROR; nothing registered', async () => {
    const bad = [
      { id: 'bad id' },
      { id: '' },
      { id: 'orders/ship' },
      { id: '-leading-dash' },
      { id: 'x'.repeat(129) },
      { id: 'push-fn', mode: 'push' as const },
      { id: 'retry-fn', retry: { maxAttempts: 0, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 1000 } },
      { id: 'retry-fn', retry: { maxAttempts: 3, initialDelayMs: 1000, backoffFactor: 0.5, maxDelayMs: 1000 } },
    ];
    for (const input of bad) {
      expect([input, await codeOf(t.engine.api.registerFunction(SCOPE, input))]).toEqual([input, { code: 'VALIDATION_ERROR', httpStatus: 400 }]);
    }
    expect((await t.engine.api.listFunctions(SCOPE)).map((f) => f.id)).toEqual(['flow']);
  });

  it('a job update whose execution_seq is not its job id\'s is STALE_EXECUTION saying so (not naming a made-up execution), and changes nothing', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const err = await t.engine.pull.update(WORKER, job.job_id, { ...fenced(job, { status: 'completed', output: 1 }), execution_seq: job.execution_seq! + 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ code: 'STALE_EXECUTION', message: `the report's execution_seq is not its job id's execution, so it matches no execution of run ${runIds[0]}` });
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'running' });
  });

  it('a yield that invokes an unregistered function fails the run with FUNCTION_NOT_FOUND and starts no child', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const result = await t.engine.pull.update(WORKER, job.job_id, fenced(job, {
      status: 'yielded',
      yield: { type: 'invoke_function', step_id: `${runIds[0]}:nope:0`, function_id: 'nope', input: {} },
    }));
    expect(result.effect).toBe('outcome');
    expect(await readRun(t, runIds[0])).toMatchObject({ status: 'failed', error: { code: 'FUNCTION_NOT_FOUND', retryable: false } });
    expect(await countRows(t, 'runs')).toBe(1);
    expect(await countRows(t, 'steps')).toBe(0);
  });

  it('Trigger with an empty or blank event name → VALIDATION_ERROR; no event or run written', async () => {
    for (const event of ['', '   ', undefined as unknown as string]) {
      expect(await codeOf(t.engine.api.trigger(SCOPE, { event, data: {} }))).toEqual({ code: 'VALIDATION_ERROR', httpStatus: 400 });
    }
    expect(await countRows(t, 'events')).toBe(0);
    expect(await countRows(t, 'runs')).toBe(0);
  });

  it('Trigger with event data over maxPayloadBytes → PAYLOAD_TOO_LARGE; no event or run written; data at the limit is accepted', async () => {
    const tooBig = { blob: 'x'.repeat(1100) };
    expect(await codeOf(t.engine.api.trigger(SCOPE, { event: 'order.placed', data: tooBig }))).toEqual({ code: 'PAYLOAD_TOO_LARGE', httpStatus: 413 });
    expect(await countRows(t, 'events')).toBe(0);
    expect(await countRows(t, 'runs')).toBe(0);

    // {"blob":"…"} is 11 bytes of framing: exactly 1024 bytes passes.
    const atLimit = { blob: 'x'.repeat(1024 - 11) };
    expect(Buffer.byteLength(JSON.stringify(atLimit))).toBe(1024);
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: atLimit });
    expect(runIds).toHaveLength(1);
    expect(await countRows(t, 'events')).toBe(1);
  });

  it('a terminal report over maxPayloadBytes → PAYLOAD_TOO_LARGE, and the run fails at once with PAYLOAD_TOO_LARGE (not retryable), its lease released', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const report = t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { blob: 'x'.repeat(2000) } }));
    expect(await codeOf(report)).toEqual({ code: 'PAYLOAD_TOO_LARGE', httpStatus: 413 });
    const after = await snapshot(t, runIds[0]);
    expect(after.run).toMatchObject({ status: 'failed', attempt: 1, output: null, error: { code: 'PAYLOAD_TOO_LARGE', retryable: false } });
    expect(after.run.error?.message).toContain('report is');
    expect(after.leases).toEqual([]);
  });

  it('a progress report over maxPayloadBytes → PAYLOAD_TOO_LARGE and the run is unchanged (the terminal report decides)', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const before = await snapshot(t, runIds[0]);
    const report = t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'progress', steps: [{ id: `${runIds[0]}:a:0`, name: 'a', type: 'invoke', status: 'completed', output: 'x'.repeat(2000) }], step_offset: 0 }));
    expect(await codeOf(report)).toEqual({ code: 'PAYLOAD_TOO_LARGE', httpStatus: 413 });
    expect(await snapshot(t, runIds[0])).toEqual(before);
  });

  it('a job update refused unread as too large (413) fails the attempt at once with PAYLOAD_TOO_LARGE, only for the worker holding its live lease', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    await registerWorker(t, ['flow'], 'w-other');
    const before = await snapshot(t, runId);
    expect(await t.engine.pull.failTooLarge('w-other', job.job_id, 1024)).toBe(false);
    expect(await t.engine.pull.failTooLarge(WORKER, `${runId}-7`, 1024)).toBe(false);
    expect(await t.engine.pull.failTooLarge(WORKER, 'not-a-job', 1024)).toBe(false);
    expect(await snapshot(t, runId)).toEqual(before);

    expect(await t.engine.pull.failTooLarge(WORKER, job.job_id, 1024)).toBe(true);
    const after = await snapshot(t, runId);
    expect(after.run).toMatchObject({ status: 'failed', attempt: 1, error: { code: 'PAYLOAD_TOO_LARGE', retryable: false } });
    expect(after.run.error?.message).toContain('1024-byte');
    expect(after.leases).toEqual([]);
    // Once ended, a second oversized update changes nothing.
    expect(await t.engine.pull.failTooLarge(WORKER, job.job_id, 1024)).toBe(false);
  });

  it.each([
    ['a completed report over maxPayloadBytes (PAYLOAD_TOO_LARGE, the run fails)', 'too-large', { status: 'failed', code: 'PAYLOAD_TOO_LARGE' }, 'RUN_NOT_RUNNING'],
    ['a yielded report with a bad yield (REPORT_REJECTED, the attempt is retried)', 'bad-yield', { status: 'waiting_for_capacity', code: 'REPORT_REJECTED' }, 'STALE_EXECUTION'],
    ['an update refused unread as too large (PAYLOAD_TOO_LARGE, the run fails)', 'unread', { status: 'failed', code: 'PAYLOAD_TOO_LARGE' }, 'RUN_NOT_RUNNING'],
  ] as const)('after %s, a later completed and a later failed report of that execution answer the same 409 and change nothing', async (_case, refusal, ended, code) => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    if (refusal === 'too-large') {
      expect(await codeOf(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { blob: 'x'.repeat(2000) } })))).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    } else if (refusal === 'bad-yield') {
      expect(await codeOf(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'teleport', step_id: `${runId}:x:0` } as never })))).toMatchObject({ code: 'VALIDATION_ERROR' });
    } else {
      expect(await t.engine.pull.failTooLarge(WORKER, job.job_id, 1024)).toBe(true);
    }
    const before = await snapshot(t, runId);
    expect(before.run).toMatchObject({ status: ended.status, error: { code: ended.code } });
    const later = {
      completed: await codeOf(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'completed', output: { ok: true } }))),
      failed: await codeOf(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'failed', error: { message: 'boom', code: 'E', retryable: false } }))),
    };
    expect(later).toEqual({ completed: { code, httpStatus: 409 }, failed: { code, httpStatus: 409 } });
    expect(await snapshot(t, runId)).toEqual(before);
  });

  it('GetRun / GetRunSteps / CancelRun of an unknown id → RUN_NOT_FOUND; an empty id → VALIDATION_ERROR', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect(await codeOf(t.engine.api.getRun(SCOPE, unknown))).toEqual({ code: 'RUN_NOT_FOUND', httpStatus: 404 });
    expect(await codeOf(t.engine.api.getRunSteps(SCOPE, unknown))).toEqual({ code: 'RUN_NOT_FOUND', httpStatus: 404 });
    expect(await codeOf(t.engine.api.cancelRun(SCOPE, unknown, ''))).toEqual({ code: 'RUN_NOT_FOUND', httpStatus: 404 });
    expect(await codeOf(t.engine.api.getRun(SCOPE, ''))).toEqual({ code: 'VALIDATION_ERROR', httpStatus: 400 });
  });

  it('a run of another env is RUN_NOT_FOUND there, and a cancel from that env leaves it untouched', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const other = { project: SCOPE.project, env: 'staging' };
    const before = await readRun(t, runIds[0]);
    expect(await codeOf(t.engine.api.getRun(other, runIds[0]))).toEqual({ code: 'RUN_NOT_FOUND', httpStatus: 404 });
    expect(await codeOf(t.engine.api.cancelRun(other, runIds[0], ''))).toEqual({ code: 'RUN_NOT_FOUND', httpStatus: 404 });
    expect(await readRun(t, runIds[0])).toEqual(before);
  });

  it('poll and heartbeat by an unregistered worker → WORKER_NOT_FOUND; nothing claimed', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const before = await readRun(t, runIds[0]);
    expect(await codeOf(t.engine.pull.poll('stranger', 1))).toEqual({ code: 'WORKER_NOT_FOUND', httpStatus: 404 });
    expect(await codeOf(t.engine.pull.heartbeat('stranger', { worker_id: 'stranger', jobs: [] }))).toEqual({ code: 'WORKER_NOT_FOUND', httpStatus: 404 });
    expect(await readRun(t, runIds[0])).toEqual(before);
  });

  it('a body whose worker_id is not the worker of the path → VALIDATION_ERROR naming both, on register and heartbeat; no lease refreshed', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const before = await snapshot(t, runIds[0]);
    const message = `worker_id "w2" is not the worker of the path, "${WORKER}"`;
    await expect(t.engine.pull.register(SCOPE, WORKER, { worker_id: 'w2', function_ids: ['flow'] })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message });
    await expect(t.engine.pull.heartbeat(WORKER, { worker_id: 'w2', jobs: [{ job_id: job.job_id }] })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message });
    expect(await snapshot(t, runIds[0])).toEqual(before);
  });

  it('a worker id that is not a subject token → VALIDATION_ERROR', async () => {
    for (const id of ['bad id', 'a.b', 'x'.repeat(129), '']) {
      expect([id, await codeOf(t.engine.pull.register(SCOPE, id, { worker_id: id, function_ids: ['flow'] }))]).toEqual([id, { code: 'VALIDATION_ERROR', httpStatus: 400 }]);
    }
  });

  it('ack and update with a malformed job id → JOB_NOT_FOUND; the live run is unchanged', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const before = await snapshot(t, runIds[0]);
    const malformed = ['garbage', `${runIds[0]}-0`, `${runIds[0]}-x`, `${runIds[0]}-1.5`, `-1`, `${runIds[0]}`.replace(/-/g, '')];
    for (const jobId of malformed) {
      expect([jobId, await codeOf(t.engine.pull.ack(WORKER, jobId, { run_id: job.run_id, execution_seq: 1, lease_token: job.lease_token }))]).toEqual([jobId, { code: 'JOB_NOT_FOUND', httpStatus: 404 }]);
      expect([jobId, await codeOf(t.engine.pull.update(WORKER, jobId, fenced(job, { status: 'completed', output: 1 })))]).toEqual([jobId, { code: 'JOB_NOT_FOUND', httpStatus: 404 }]);
    }
    expect(await snapshot(t, runIds[0])).toEqual(before);
  });

  it('a well-formed job id of an unknown run → RUN_NOT_FOUND', async () => {
    const jobId = '00000000-0000-4000-8000-000000000000-1';
    expect(await codeOf(t.engine.pull.ack(WORKER, jobId, { execution_seq: 1, lease_token: 'x' }))).toEqual({ code: 'RUN_NOT_FOUND', httpStatus: 404 });
    expect(await codeOf(t.engine.pull.update(WORKER, jobId, { status: 'completed', output: 1, execution_seq: 1, lease_token: 'x' }))).toEqual({ code: 'RUN_NOT_FOUND', httpStatus: 404 });
  });

  it('an update with an unknown status → VALIDATION_ERROR; the run is unchanged (the body is not a report)', async () => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const before = await snapshot(t, runIds[0]);
    expect(await codeOf(t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'finished' as never })))).toEqual({ code: 'VALIDATION_ERROR', httpStatus: 400 });
    expect(await snapshot(t, runIds[0])).toEqual(before);
  });

  it.each([
    ['no yield', undefined],
    ['a yield without step_id', { type: 'sleep', until: new Date().toISOString() }],
    ['a sleep whose until is not a time', { type: 'sleep', step_id: 'S', until: 'not a time' }],
    ['an unknown yield type', { type: 'teleport', step_id: 'S' }],
    ['a wait without an event', { type: 'wait_for_event', step_id: 'S', event_filter: { timeout: '1h' } }],
    ['an invoke timeout past any storable time', { type: 'invoke_function', step_id: 'S', function_id: 'flow', invoke_timeout_ms: 1e19 }],
  ])('a yielded report with %s → VALIDATION_ERROR, and the attempt fails with REPORT_REJECTED (retryable) instead of leaving the run running', async (_case, y) => {
    const { runIds } = await t.engine.api.trigger(SCOPE, { event: 'order.placed', data: {} });
    const job = await pollAndAck(t);
    const body = fenced(job, { status: 'yielded', yield: (y === undefined ? undefined : JSON.parse(JSON.stringify(y).replace('"S"', `"${runIds[0]}:x:0"`))) as never });
    expect(await codeOf(t.engine.pull.update(WORKER, job.job_id, body))).toEqual({ code: 'VALIDATION_ERROR', httpStatus: 400 });
    const after = await snapshot(t, runIds[0]);
    expect(after.run).toMatchObject({ status: 'waiting_for_capacity', attempt: 2, error: { code: 'REPORT_REJECTED', retryable: true } });
    expect(after.leases).toEqual([]);
    expect(after.steps).toEqual([]);
    expect(await countRows(t, 'runs')).toBe(1);
  });
});
