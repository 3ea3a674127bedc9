/**
 * What a worker receives, value by value (issue 7, items 1 and 2; WIRE-PROTOCOL.md 2.2, 3.4):
 * every `completed_steps` entry carries `output` (`null` when the step has none), `event.data`
 * is always present, and an emitted event's `version` and `metadata` reach the assignment and the
 * push request (absent metadata stays absent, never null). Both stores.
 */
import { toPushRequest } from '@ironflow/engine';
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { WORKER, fenced, pollAndAck, ranStep, registerPull, registerWorker, stepId } from './engine-kit.test';

describe.each(STORES)('assignment values [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'f', triggers: [{ event: 'go' }], retry: { maxAttempts: 3, initialDelayMs: 0, backoffFactor: 1, maxDelayMs: 0 } });
    await registerWorker(t, ['f']);
  });
  afterEach(() => t.close());

  it('a finished sleep comes back in completed_steps with "output": null (step.run a → sleep nap → step.run b)', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: { n: 1 } });
    const first = await pollAndAck(t);
    await t.engine.pull.update(WORKER, first.job_id, fenced(first, { status: 'progress', steps: [ranStep(runId, 'a', { x: 1 })], step_offset: 0 }));
    const until = new Date(t.db.clock.now() + 1000).toISOString();
    await t.engine.pull.update(WORKER, first.job_id, fenced(first, { status: 'yielded', yield: { type: 'sleep', step_id: stepId(runId, 'nap'), until } }));
    t.db.clock.advance(1001);
    expect(await t.engine.scheduler.sleepSweep()).toBe(1);

    const second = await pollAndAck(t);
    expect(second.completed_steps).toStrictEqual([
      { step_id: stepId(runId, 'a'), name: 'a', output: { x: 1 } },
      { step_id: stepId(runId, 'nap'), name: 'nap', output: null },
    ]);
    expect(JSON.stringify(second.completed_steps[1])).toBe(`{"step_id":"${stepId(runId, 'nap')}","name":"nap","output":null}`);
    await t.engine.pull.update(WORKER, second.job_id, fenced(second, { status: 'completed', output: 'done', steps: [ranStep(runId, 'b', 2)], step_offset: second.step_sequence_base }));
    expect((await t.engine.api.getRun(SCOPE, runId)).status).toBe('completed');
  });

  it('a step that returned undefined, then a retryable failure: the retry\'s assignment has it with "output": null', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const first = await pollAndAck(t);
    const { output: _none, ...quiet } = ranStep(runId, 'log', undefined);
    await t.engine.pull.update(WORKER, first.job_id, fenced(first, { status: 'failed', error: { message: 'fetch failed', retryable: true }, steps: [quiet], step_offset: 0 }));

    const retry = await pollAndAck(t);
    expect(retry.attempt).toBe(2);
    expect(retry.completed_steps).toStrictEqual([{ step_id: stepId(runId, 'log'), name: 'log', output: null }]);
  });

  it('event.data is always present, and version and metadata of the emitted event reach the assignment', async () => {
    const { runIds: [withFields] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: { n: 2 }, version: 2, metadata: { src: 'x' } });
    const job = await pollAndAck(t);
    expect(job.run_id).toBe(withFields);
    expect(job.event).toMatchObject({ name: 'go', data: { n: 2 }, version: 2, metadata: { src: 'x' } });

    await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const plain = await pollAndAck(t);
    expect(plain.event.version).toBe(1);
    expect('metadata' in plain.event).toBe(false);
    expect('data' in plain.event).toBe(true);
  });

  it('refuses a version that is not an integer from 1 to 2^31-1, and metadata that is not an object, writing nothing', async () => {
    for (const version of [0, -1, 1.5, 2 ** 31]) {
      await expect(t.engine.api.trigger(SCOPE, { event: 'go', data: {}, version })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    for (const metadata of [[1], 'x', 5] as unknown[]) {
      await expect(t.engine.api.trigger(SCOPE, { event: 'go', data: {}, metadata: metadata as Record<string, unknown> })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    expect((await t.engine.api.listRuns(SCOPE, {})).totalCount).toBe(0);
  });

  it('a waitForEvent step completes with the whole event, version and metadata included', async () => {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const first = await pollAndAck(t);
    await t.engine.pull.update(WORKER, first.job_id, fenced(first, { status: 'yielded', yield: { type: 'wait_for_event', step_id: stepId(runId, 'reply'), event_filter: { event: 'reply', timeout: '1h' } } }));
    const { eventId } = await t.engine.api.trigger(SCOPE, { event: 'reply', data: { ok: true }, version: 4, metadata: { by: 'ops' } });
    const next = await pollAndAck(t);
    expect(next.completed_steps).toStrictEqual([
      { step_id: stepId(runId, 'reply'), name: 'reply', output: { id: eventId, name: 'reply', data: { ok: true }, timestamp: expect.any(String), version: 4, metadata: { by: 'ops' } } },
    ]);
  });
});

describe.each(STORES)('push request values [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await t.engine.api.registerFunction(SCOPE, { id: 'p', mode: 'push', endpointUrl: 'http://127.0.0.1:9/never-called', triggers: [{ event: 'go' }] });
  });
  afterEach(() => t.close());

  it('carries the event\'s version and metadata, and no metadata key when the event has none', async () => {
    await t.engine.api.trigger(SCOPE, { event: 'go', data: { a: 1 }, version: 2, metadata: { src: 'x' } });
    await t.engine.api.trigger(SCOPE, { event: 'go', data: {} });
    const segments = await t.engine.dispatch.claim({ mode: 'push', limit: 2 }, 'node-test');
    const requests = segments.map(toPushRequest).sort((a, b) => (b.event.version ?? 0) - (a.event.version ?? 0));
    expect(requests[0].event).toMatchObject({ data: { a: 1 }, version: 2, metadata: { src: 'x' } });
    expect(requests[1].event.version).toBe(1);
    expect('metadata' in requests[1].event).toBe(false);
    expect(requests[1].event.data).toEqual({});
  });
});
