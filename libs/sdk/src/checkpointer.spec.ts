import type { StepResult } from '@ironflow/contracts';
import { Checkpointer } from './checkpointer';
import { deferred, waitFor } from './testing/fake-server';

const step = (i: number): StepResult => ({ id: `run-1:s:${i}`, name: 's', type: 'invoke', status: 'completed', output: i });

interface Sent {
  ids: string[];
  offset: number;
}

function recorder(statuses: (number | Error)[] = []) {
  const sent: Sent[] = [];
  let concurrent = 0;
  let maxConcurrent = 0;
  const send = async (steps: StepResult[], offset: number) => {
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    try {
      await new Promise((r) => setImmediate(r));
      sent.push({ ids: steps.map((s) => s.id), offset });
      const next = statuses.shift() ?? 200;
      if (next instanceof Error) throw next;
      return next;
    } finally {
      concurrent--;
    }
  };
  return { sent, send, maxConcurrent: () => maxConcurrent };
}

describe('Checkpointer', () => {
  it('sends a debounced batch with step_offset = base, then the next from base + flushed', async () => {
    const r = recorder();
    const cp = new Checkpointer({ intervalMs: 5, sequenceBase: 7, send: r.send });
    cp.record(step(0));
    cp.record(step(1));
    await waitFor(() => r.sent.length === 1, 'first batch');
    cp.record(step(2));
    await waitFor(() => r.sent.length === 2, 'second batch');
    await cp.settle();
    expect(r.sent).toEqual([
      { ids: ['run-1:s:0', 'run-1:s:1'], offset: 7 },
      { ids: ['run-1:s:2'], offset: 9 },
    ]);
    expect(cp.unflushed).toEqual([]);
    expect(cp.stepOffset).toBe(10);
  });

  it('sends at most 500 steps per update, contiguous offsets, when flushing everything', async () => {
    const r = recorder();
    const cp = new Checkpointer({ intervalMs: 60_000, sequenceBase: 3, send: r.send });
    for (let i = 0; i < 1_201; i++) cp.record(step(i));
    await cp.settle();
    await cp.flushDownTo(0);
    expect(r.sent.map((s) => [s.ids.length, s.offset])).toEqual([
      [500, 3],
      [500, 503],
      [201, 1_003],
    ]);
    expect(r.sent[1].ids[0]).toBe('run-1:s:500');
    expect(cp.stepOffset).toBe(1_204);
  });

  it('flushDownTo(500) leaves a tail of at most 500 for the terminal update', async () => {
    const r = recorder();
    const cp = new Checkpointer({ intervalMs: 60_000, sequenceBase: 0, send: r.send });
    for (let i = 0; i < 700; i++) cp.record(step(i));
    await cp.settle();
    await cp.flushDownTo(500);
    expect(r.sent.map((s) => s.ids.length)).toEqual([500]);
    expect(cp.unflushed).toHaveLength(200);
    expect(cp.stepOffset).toBe(500);
  });

  it('turns itself off for the job after a 4xx (e.g. 409 STALE_EXECUTION) and keeps the steps unflushed', async () => {
    const r = recorder([409]);
    const cp = new Checkpointer({ intervalMs: 5, sequenceBase: 0, send: r.send });
    cp.record(step(0));
    await waitFor(() => r.sent.length === 1, 'refused batch');
    await waitFor(() => !cp.active, 'latched off');
    cp.record(step(1));
    await cp.settle();
    await cp.flushDownTo(0);
    expect(r.sent).toHaveLength(1);
    expect(cp.unflushed.map((s) => s.id)).toEqual(['run-1:s:0', 'run-1:s:1']);
    expect(cp.stepOffset).toBe(0);
  });

  it('retries after a 5xx or network failure with the same offset, and never overlaps sends', async () => {
    const r = recorder([503, new TypeError('fetch failed')]);
    const cp = new Checkpointer({ intervalMs: 2, sequenceBase: 4, send: r.send });
    cp.record(step(0));
    cp.record(step(1));
    await waitFor(() => r.sent.length === 3, 'third attempt');
    await cp.settle();
    expect(r.sent.map((s) => s.offset)).toEqual([4, 4, 4]);
    expect(r.sent[2].ids).toEqual(['run-1:s:0', 'run-1:s:1']);
    expect(cp.unflushed).toEqual([]);
    expect(r.maxConcurrent()).toBe(1);
  });

  it('does nothing on its own when the interval is 0', async () => {
    const r = recorder();
    const cp = new Checkpointer({ intervalMs: 0, sequenceBase: 0, send: r.send });
    cp.record(step(0));
    await cp.settle();
    await cp.flushDownTo(0);
    expect(r.sent).toEqual([]);
    expect(cp.unflushed).toHaveLength(1);
  });

  it('settle waits for a send under way before the terminal update is built', async () => {
    const gate = deferred();
    const sent: number[] = [];
    const cp = new Checkpointer({
      intervalMs: 1,
      sequenceBase: 0,
      send: async (steps) => {
        await gate.promise;
        sent.push(steps.length);
        return 200;
      },
    });
    cp.record(step(0));
    await waitFor(() => (cp as unknown as { inflight?: Promise<unknown> }).inflight !== undefined, 'send under way');
    cp.record(step(1));
    let settled = false;
    const settling = cp.settle().then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    gate.resolve();
    await settling;
    expect(sent).toEqual([1]);
    expect(cp.unflushed.map((s) => s.id)).toEqual(['run-1:s:1']);
    expect(cp.stepOffset).toBe(1);
  });
  it('flushDownTo asks retry after each transient failure (counting them) and resends the same batch; a 4xx ends it without asking', async () => {
    const r = recorder([503, new TypeError('fetch failed'), 200, 200]);
    const cp = new Checkpointer({ intervalMs: 60_000, sequenceBase: 0, send: r.send });
    for (let i = 0; i < 501; i++) cp.record(step(i));
    await cp.settle();
    const asked: number[] = [];
    await cp.flushDownTo(0, async (failures) => (asked.push(failures), true));
    expect(asked).toEqual([1, 2]);
    expect(r.sent.map((s) => [s.ids.length, s.offset])).toEqual([
      [500, 0],
      [500, 0],
      [500, 0],
      [1, 500],
    ]);
    expect(cp.unflushed).toEqual([]);

    const refused = recorder([500, 409]);
    const cp2 = new Checkpointer({ intervalMs: 60_000, sequenceBase: 0, send: refused.send });
    cp2.record(step(0));
    await cp2.settle();
    const asked2: number[] = [];
    await cp2.flushDownTo(0, async (failures) => (asked2.push(failures), true));
    expect(asked2).toEqual([1]);
    expect(refused.sent).toHaveLength(2);
    expect(cp2.active).toBe(false);

    const givenUp = recorder([502, 502]);
    const cp3 = new Checkpointer({ intervalMs: 60_000, sequenceBase: 0, send: givenUp.send });
    cp3.record(step(0));
    await cp3.settle();
    await cp3.flushDownTo(0, async (failures) => failures < 2);
    expect(givenUp.sent).toHaveLength(2);
    expect(cp3.unflushed).toHaveLength(1);
  });
});
