/**
 * Event names and `waitForEvent` matches (issue 7 items 7 and 11), on both stores:
 * - a trigger's event name is normalised at registration as at emit (trimmed), so a trigger
 *   registered as `"x.go "` fires; a blank one is refused;
 * - a wait's `match` compares values structurally (object key order irrelevant); a field missing
 *   on the waiting side matches nothing; one missing on the incoming event does not match `null`.
 */
import { SCOPE, STORES, TestEngine, openTestEngine } from '@ironflow/testing';
import { canonicalJson, dataPathProblem, valueAtPath } from '../json-path';
import { WORKER, fenced, pollAndAck, readRun, registerPull, registerWorker, stepId } from './engine-kit.test';

describe.each(STORES)('event names [%s]', (dialect) => {
  let t: TestEngine;
  beforeEach(async () => {
    t = await openTestEngine(dialect);
  });
  afterEach(() => t.close());

  it('a trigger registered as "x.go " fires on emit("x.go") and emit(" x.go"), stored as "x.go"', async () => {
    const { function: fn } = await t.engine.api.registerFunction(SCOPE, { id: 'f', mode: 'pull', triggers: [{ event: 'x.go ' }] });
    expect(fn.triggers).toEqual([{ event: 'x.go' }]);
    expect((await t.engine.api.trigger(SCOPE, { event: 'x.go', data: {} })).runIds).toHaveLength(1);
    expect((await t.engine.api.trigger(SCOPE, { event: ' x.go', data: {} })).runIds).toHaveLength(1);
  });

  it('a trigger whose event name is blank is refused with VALIDATION_ERROR naming it', async () => {
    await expect(t.engine.api.registerFunction(SCOPE, { id: 'f', mode: 'pull', triggers: [{ event: '   ' }] })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining('triggers.0.event') });
    expect(await t.engine.api.listFunctions(SCOPE)).toEqual([]);
  });
});

describe.each(STORES)('waitForEvent match [%s]', (dialect) => {
  let t: TestEngine;

  beforeEach(async () => {
    t = await openTestEngine(dialect);
    await registerPull(t, { id: 'flow', triggers: [{ event: 'started' }] });
    await registerWorker(t, ['flow']);
  });
  afterEach(() => t.close());

  /** Starts a run with `data` and yields it at a wait for `reply` matching `match`. */
  async function waiting(data: unknown, match: string): Promise<string> {
    const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'started', data });
    const job = await pollAndAck(t);
    await t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'wait_for_event', step_id: stepId(runId, 'reply'), event_filter: { event: ' reply ', match, timeout: '1h' } } }));
    expect((await readRun(t, runId)).status).toBe('waiting');
    return runId;
  }

  it('compares object values structurally: key order does not matter', async () => {
    const runId = await waiting({ key: { a: 1, b: [1, { c: 2, d: 3 }] } }, 'data.key');
    await t.engine.api.trigger(SCOPE, { event: 'reply', data: { key: { b: [1, { d: 3, c: 2 }], a: 1 } } });
    expect((await readRun(t, runId)).status).toBe('waiting_for_capacity');
  });

  it('does not match a different value', async () => {
    const runId = await waiting({ key: { a: 1 } }, 'data.key');
    await t.engine.api.trigger(SCOPE, { event: 'reply', data: { key: { a: 2 } } });
    expect((await readRun(t, runId)).status).toBe('waiting');
  });

  it('a field missing on the waiting side matches nothing: neither an event without it nor one with null', async () => {
    const runId = await waiting({ other: 1 }, 'data.key');
    await t.engine.api.trigger(SCOPE, { event: 'reply', data: {} });
    await t.engine.api.trigger(SCOPE, { event: 'reply', data: { key: null } });
    expect((await readRun(t, runId)).status).toBe('waiting');
  });

  it('a waiting null matches an incoming null, not an incoming event without the field', async () => {
    const runId = await waiting({ key: null }, 'data.key');
    await t.engine.api.trigger(SCOPE, { event: 'reply', data: {} });
    expect((await readRun(t, runId)).status).toBe('waiting');
    await t.engine.api.trigger(SCOPE, { event: 'reply', data: { key: null } });
    expect((await readRun(t, runId)).status).toBe('waiting_for_capacity');
  });

  it('an empty or malformed match is refused with VALIDATION_ERROR naming it (it was taken for no match), and the run does not wait', async () => {
    for (const [match, why] of [
      ['', 'an empty path (leave it out for none)'],
      ['data..key', '"data..key" has an empty name between dots'],
      ['.key', '".key" has an empty name between dots'],
      ['data.', '"data." has an empty name between dots'],
    ] as const) {
      const { runIds: [runId] } = await t.engine.api.trigger(SCOPE, { event: 'started', data: { key: 1 } });
      const job = await pollAndAck(t);
      const report = t.engine.pull.update(WORKER, job.job_id, fenced(job, { status: 'yielded', yield: { type: 'wait_for_event', step_id: stepId(runId, 'reply'), event_filter: { event: 'reply', match, timeout: '1h' } } }));
      await expect(report).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining(`yield.event_filter.match: ${why}`) });
      expect((await readRun(t, runId)).status).not.toBe('waiting');
      await t.engine.api.cancelRun(SCOPE, runId, 'next case');
    }
  });
});

describe('JSON paths and canonical JSON', () => {
  it('reads own properties only', () => {
    expect(valueAtPath({ data: { a: { b: 2 } } }, 'data.a.b')).toBe(2);
    expect(valueAtPath({ data: [5, 6] }, 'data.1')).toBe(6);
    expect(valueAtPath({ data: {} }, 'data.constructor')).toBeUndefined();
    expect(valueAtPath({ data: {} }, 'data.__proto__')).toBeUndefined();
  });

  it('a data path is names joined by single dots: an empty path or an empty name is a problem, said why', () => {
    for (const path of ['customerId', 'data.customerId', 'event.data.a.0', 'a b']) expect(dataPathProblem(path)).toBeUndefined();
    expect(dataPathProblem('')).toBe('an empty path (leave it out for none)');
    for (const path of ['data..x', '.x', 'x.', '.']) {
      expect(dataPathProblem(path)).toBe(`${JSON.stringify(path)} has an empty name between dots (a path is names joined by single dots, e.g. data.customerId)`);
    }
  });

  it('sorts keys at every level', () => {
    expect(canonicalJson({ b: 1, a: { d: [{ f: 1, e: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[{"e":2,"f":1}]},"b":1}');
  });
});
