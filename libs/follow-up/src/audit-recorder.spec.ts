import { RecordingProfile } from '@ironflow/contracts';
import { getEventListeners, getMaxListeners } from 'events';
import { AuditNotWritten, AuditRecorder, AuditRecorderOptions, AuditSink, AuditWriteOptions, ScopedAuditRow } from './audit-recorder';

const row = (eventType = 'run.status_changed', functionId = 'f'): ScopedAuditRow => ({ project: 'p', env: 'e', runId: 'r', functionId, eventType });

/** A sink whose writes stay pending until the test settles them: a stuck audit table. */
class StuckSink implements AuditSink {
  readonly pending: { rows: ScopedAuditRow[]; options: AuditWriteOptions; resolve: () => void; reject: (e: unknown) => void }[] = [];
  write(rows: ScopedAuditRow[], options: AuditWriteOptions): Promise<void> {
    return new Promise((resolve, reject) => this.pending.push({ rows, options, resolve, reject }));
  }
}

const flush = () => new Promise((r) => setImmediate(r));

describe('AuditRecorder', () => {
  let drops: { eventType: string; reason: string }[];
  const onDrop = (eventType: string, reason: string) => drops.push({ eventType, reason });
  const recorder = (sink: AuditSink, options: Partial<AuditRecorderOptions> = {}) => new AuditRecorder(sink, { slots: 1, onDrop, ...options });
  beforeEach(() => { drops = []; });

  it('resolves true when the sink acknowledges the row', async () => {
    const sink = new StuckSink();
    const written = recorder(sink).record(row());
    await flush();
    sink.pending[0].resolve();
    expect(await written).toBe(true);
    expect(drops).toEqual([]);
  });

  it('drops at once, and counts, a write past the backlog of writes running or waiting', async () => {
    const sink = new StuckSink();
    const r = recorder(sink, { backlog: 3, budgetMs: 60_000, slots: 3 });
    const first = [r.record(row()), r.record(row()), r.record(row())];
    expect(r.inFlight).toBe(3);
    expect(await r.record(row('run.created'))).toBe(false);
    expect(drops).toEqual([{ eventType: 'run.created', reason: 'backlog' }]);
    await flush();
    sink.pending.forEach((p) => p.resolve());
    expect(await Promise.all(first)).toEqual([true, true, true]);
    expect(r.inFlight).toBe(0);
  });

  it('holds at most `slots` requests at once; the rows waiting when a slot frees go together in one request', async () => {
    const sink = new StuckSink();
    const r = recorder(sink, { slots: 2, budgetMs: 60_000 });
    const all = [1, 2, 3, 4, 5].map(() => r.record(row()));
    await flush();
    expect(sink.pending.map((p) => p.rows.length)).toEqual([1, 1]);
    sink.pending[0].resolve();
    await flush();
    await flush();
    expect(sink.pending.map((p) => p.rows.length)).toEqual([1, 1, 3]);
    sink.pending.slice(1).forEach((p) => p.resolve());
    expect(await Promise.all(all)).toEqual([true, true, true, true, true]);
  });

  it('lets a sink listen on the stop signal in every slot within the signal\'s listener limit (a NATS sink waiting to retry)', async () => {
    const SLOTS = 16;
    const listening: AuditWriteOptions[] = [];
    const sink: AuditSink = {
      write: (_rows, options) => new Promise<void>((_, reject) => {
        options.signal.addEventListener('abort', () => reject(new AuditNotWritten('stopped', 'stopped while waiting')), { once: true });
        listening.push(options);
      }),
    };
    const r = recorder(sink, { slots: SLOTS, budgetMs: 60_000 });
    const rows = Array.from({ length: SLOTS }, () => r.record(row()));
    await flush();
    expect(listening).toHaveLength(SLOTS);
    const { signal } = listening[0];
    expect(getEventListeners(signal, 'abort')).toHaveLength(SLOTS);
    expect(getEventListeners(signal, 'abort').length).toBeLessThanOrEqual(getMaxListeners(signal));
    await r.stop();
    expect(await Promise.all(rows)).toEqual(Array(SLOTS).fill(false));
    expect(drops).toEqual(Array(SLOTS).fill({ eventType: 'run.status_changed', reason: 'stopped' }));
  });

  describe('background rows (lingerMs)', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('wait up to lingerMs and go together in one request', async () => {
      const sink = new StuckSink();
      const r = recorder(sink, { budgetMs: 5000, lingerMs: 100 });
      const first = r.record(row('run.created'), { background: true });
      await jest.advanceTimersByTimeAsync(60);
      const second = r.record(row(), { background: true });
      await jest.advanceTimersByTimeAsync(39);
      expect(sink.pending).toHaveLength(0);
      await jest.advanceTimersByTimeAsync(1);
      expect(sink.pending.map((p) => p.rows.map((x) => x.eventType))).toEqual([['run.created', 'run.status_changed']]);
      expect(sink.pending[0].options.budgetMs).toBe(4900);
      sink.pending[0].resolve();
      expect(await Promise.all([first, second])).toEqual([true, true]);
      expect(drops).toEqual([]);
    });

    it('a row recorded without `background` goes at once and takes the lingering rows along', async () => {
      const sink = new StuckSink();
      const r = recorder(sink, { budgetMs: 5000, lingerMs: 100 });
      const lingering = r.record(row('run.created'), { background: true });
      await jest.advanceTimersByTimeAsync(10);
      const urgent = r.record(row());
      await jest.advanceTimersByTimeAsync(0);
      expect(sink.pending.map((p) => p.rows.map((x) => x.eventType))).toEqual([['run.created', 'run.status_changed']]);
      sink.pending[0].resolve();
      expect(await Promise.all([lingering, urgent])).toEqual([true, true]);
    });

    it('go at once when they fill a request (maxBatch)', async () => {
      const sink = new StuckSink();
      const r = recorder(sink, { budgetMs: 5000, lingerMs: 100, maxBatch: 3 });
      const all = [1, 2, 3].map(() => r.record(row(), { background: true }));
      await jest.advanceTimersByTimeAsync(0);
      expect(sink.pending.map((p) => p.rows.length)).toEqual([3]);
      sink.pending[0].resolve();
      expect(await Promise.all(all)).toEqual([true, true, true]);
    });

    it('go at once when the linger ends (shutdown began), and later ones do not wait either', async () => {
      const sink = new StuckSink();
      const r = recorder(sink, { budgetMs: 5000, lingerMs: 1000, slots: 2 });
      const lingering = r.record(row('run.created'), { background: true });
      await jest.advanceTimersByTimeAsync(10);
      expect(sink.pending).toHaveLength(0);
      r.endLinger();
      await jest.advanceTimersByTimeAsync(0);
      expect(sink.pending.map((p) => p.rows.map((x) => x.eventType))).toEqual([['run.created']]);
      const later = r.record(row(), { background: true });
      await jest.advanceTimersByTimeAsync(0);
      expect(sink.pending.map((p) => p.rows.map((x) => x.eventType))).toEqual([['run.created'], ['run.status_changed']]);
      sink.pending.forEach((p) => p.resolve());
      expect(await Promise.all([lingering, later])).toEqual([true, true]);
      expect(drops).toEqual([]);
    });

    it('are dropped and counted by stop like any waiting row, and nothing is sent after it', async () => {
      const sink = new StuckSink();
      const r = recorder(sink, { budgetMs: 5000, lingerMs: 100 });
      const lingering = r.record(row('run.created'), { background: true });
      await jest.advanceTimersByTimeAsync(10);
      await r.stop();
      expect(await lingering).toBe(false);
      await jest.advanceTimersByTimeAsync(200);
      expect(sink.pending).toHaveLength(0);
      expect(drops).toEqual([{ eventType: 'run.created', reason: 'stopped' }]);
    });
  });

  it('drops a row still waiting for a slot at its deadline, and sends a row with what is left of its budget', async () => {
    jest.useFakeTimers();
    try {
      const sink = new StuckSink();
      const r = recorder(sink, { budgetMs: 5000 });
      const first = r.record(row('run.created'));
      await jest.advanceTimersByTimeAsync(1000);
      const second = r.record(row());
      await jest.advanceTimersByTimeAsync(1);
      expect(sink.pending).toHaveLength(1);
      expect(sink.pending[0].options.budgetMs).toBe(5000);
      await jest.advanceTimersByTimeAsync(4999);
      expect(await second).toBe(false);
      expect(drops).toEqual([{ eventType: 'run.status_changed', reason: 'budget' }]);
      sink.pending[0].reject(new AuditNotWritten('budget', 'lock timeout'));
      expect(await first).toBe(false);
      expect(drops).toEqual([{ eventType: 'run.status_changed', reason: 'budget' }, { eventType: 'run.created', reason: 'budget' }]);
    } finally {
      jest.useRealTimers();
    }
  });

  it('counts a row the writer stored late as written, not lost: the writer\'s answer decides, never the sender\'s timer', async () => {
    jest.useFakeTimers();
    try {
      const sink = new StuckSink();
      const r = recorder(sink, { budgetMs: 5000 });
      const written = r.record(row());
      await jest.advanceTimersByTimeAsync(6000);
      sink.pending[0].resolve();
      expect(await written).toBe(true);
      expect(drops).toEqual([]);
    } finally {
      jest.useRealTimers();
    }
  });

  it('counts a failed insert as a drop', async () => {
    const sink = new StuckSink();
    const written = recorder(sink).record(row());
    await flush();
    sink.pending[0].reject(new Error('table locked'));
    expect(await written).toBe(false);
    expect(drops).toEqual([{ eventType: 'run.status_changed', reason: 'error' }]);
  });

  it('stop drops every waiting and later write, each counted, signals the running ones and waits for their answer', async () => {
    const sink = new StuckSink();
    const r = recorder(sink, { budgetMs: 60_000 });
    const running = r.record(row('run.created'));
    const waiting = [r.record(row()), r.record(row())];
    await flush();
    let stopped = false;
    const stopping = r.stop().then(() => { stopped = true; });
    expect(await Promise.all(waiting)).toEqual([false, false]);
    expect(await r.record(row('run.cancelled'))).toBe(false);
    expect(sink.pending[0].options.signal.aborted).toBe(true);
    await flush();
    expect(stopped).toBe(false);
    sink.pending[0].reject(new AuditNotWritten('stopped', 'ended before its insert'));
    await stopping;
    expect(await running).toBe(false);
    expect(drops.map((d) => `${d.eventType}:${d.reason}`).sort()).toEqual(['run.cancelled:stopped', 'run.created:stopped', 'run.status_changed:stopped', 'run.status_changed:stopped']);
    expect(sink.pending).toHaveLength(1);
  });

  describe('recording profiles', () => {
    const lookupOf = (profiles: Record<string, RecordingProfile | null>) => {
      const calls: string[] = [];
      return { calls, lookup: async (_p: string, _e: string, fn: string) => { calls.push(fn); const v = profiles[fn]; if (v === undefined) throw new Error('store down'); return v; } };
    };
    const okSink = { written: [] as string[], write: async function (rows: ScopedAuditRow[]) { this.written.push(...rows.map((x) => `${x.functionId}:${x.eventType}`)); } };
    beforeEach(() => { okSink.written = []; });

    it('writes what the function records: run rows for run_lifecycle, step rows too for all, nothing for none; a missing function loses nothing', async () => {
      const { lookup } = lookupOf({ life: 'run_lifecycle', all: 'all', none: 'none', gone: null });
      const r = recorder(okSink, { recordingLookup: lookup, slots: 4 });
      const results = await Promise.all([
        r.record(row('run.created', 'life')), r.record(row('step.completed', 'life')),
        r.record(row('run.created', 'all')), r.record(row('step.completed', 'all')),
        r.record(row('run.created', 'none')), r.record(row('run.created', 'gone')),
      ]);
      expect(results).toEqual([true, false, true, true, false, false]);
      expect(okSink.written.sort()).toEqual(['all:run.created', 'all:step.completed', 'life:run.created']);
      expect(drops).toEqual([]);
    });

    it('skips says a row would certainly not be written only from a cached profile (issue 11: a report skips the read its step rows need)', async () => {
      const { lookup } = lookupOf({ life: 'run_lifecycle', all: 'all', gone: null });
      const r = recorder(okSink, { recordingLookup: lookup, slots: 4 });
      expect(r.skips('p', 'e', 'life', 'step.completed')).toBe(false);
      await Promise.all([r.record(row('run.created', 'life')), r.record(row('run.created', 'all')), r.record(row('run.created', 'gone'))]);
      expect(r.skips('p', 'e', 'life', 'step.completed')).toBe(true);
      expect(r.skips('p', 'e', 'life', 'run.status_changed')).toBe(false);
      expect(r.skips('p', 'e', 'all', 'step.completed')).toBe(false);
      expect(r.skips('p', 'e', 'gone', 'step.completed')).toBe(true);
      expect(recorder(okSink).skips('p', 'e', 'life', 'step.completed')).toBe(false);
    });

    it('looks a function up once, in a slot, caches it and refreshes it after the refresh period off the row\'s path', async () => {
      jest.useFakeTimers();
      try {
        const profiles: Record<string, RecordingProfile> = { f: 'all' };
        const { calls, lookup } = lookupOf(profiles);
        const r = recorder(okSink, { recordingLookup: lookup, recordingRefreshMs: 30_000 });
        expect(await Promise.all([r.record(row()), r.record(row())])).toEqual([true, true]);
        expect(calls).toEqual(['f']);
        profiles.f = 'none';
        await jest.advanceTimersByTimeAsync(29_000);
        expect(await r.record(row())).toBe(true);
        expect(calls).toEqual(['f']);
        await jest.advanceTimersByTimeAsync(1000);
        expect(await r.record(row())).toBe(true); // the refresh runs behind this row
        await jest.advanceTimersByTimeAsync(1);
        expect(calls).toEqual(['f', 'f']);
        expect(await r.record(row())).toBe(false);
        expect(drops).toEqual([]);
      } finally {
        jest.useRealTimers();
      }
    });

    it('counts a row whose first lookup failed as recording_lookup; a failed refresh keeps the last profile and counts nothing', async () => {
      jest.useFakeTimers();
      try {
        const profiles: Record<string, RecordingProfile | undefined> = { f: undefined };
        const { lookup } = lookupOf(profiles as Record<string, RecordingProfile>);
        const r = recorder(okSink, { recordingLookup: lookup, recordingRefreshMs: 1000 });
        expect(await r.record(row())).toBe(false);
        expect(drops).toEqual([{ eventType: 'recording_lookup', reason: 'error' }]);
        profiles.f = 'all';
        expect(await r.record(row())).toBe(true);
        profiles.f = undefined;
        await jest.advanceTimersByTimeAsync(1000);
        expect(await r.record(row())).toBe(true);
        await jest.advanceTimersByTimeAsync(1);
        expect(await r.record(row())).toBe(true);
        expect(drops).toHaveLength(1);
      } finally {
        jest.useRealTimers();
      }
    });

    describe('rows waiting for a running lookup', () => {
      /** A lookup that stays pending until the test answers it: a slow first read of the function. */
      const heldLookup = () => {
        let begun!: () => void;
        let answer!: (profile: RecordingProfile) => void;
        const started = new Promise<void>((resolve) => (begun = resolve));
        const lookup = () => new Promise<RecordingProfile>((resolve) => ((answer = resolve), begun()));
        return { lookup, started, answer: (profile: RecordingProfile) => answer(profile) };
      };
      const ROWS = 50;

      // Jest gives a test file its own copy of `process`: Node's warnings reach the real one only,
      // so this checks the condition Node warns on (more 'abort' listeners than the signal's limit).
      it('many rows waiting for the first lookup add no listener each to the stop signal (MaxListenersExceededWarning under load)', async () => {
        const signals: AbortSignal[] = [];
        const sink = { write: async (_rows: ScopedAuditRow[], options: AuditWriteOptions) => { signals.push(options.signal); } };
        const held = heldLookup();
        const r = recorder(sink, { recordingLookup: held.lookup, slots: 4 });
        expect(await r.record({ ...row('run.created'), functionId: null })).toBe(true); // no lookup: shows the signal
        const rows = Array.from({ length: ROWS }, () => r.record(row('run.created')));
        await held.started;
        expect(getEventListeners(signals[0], 'abort').length).toBeLessThanOrEqual(getMaxListeners(signals[0]));
        held.answer('all');
        expect(await Promise.all(rows)).toEqual(Array(ROWS).fill(true));
      });

      it('stop drops every row waiting for a running lookup at once, each counted as recording_lookup stopped', async () => {
        const held = heldLookup();
        const r = recorder(okSink, { recordingLookup: held.lookup, slots: 4 });
        const rows = Array.from({ length: ROWS }, () => r.record(row('run.created')));
        await held.started;
        const stopping = r.stop();
        expect(await Promise.all(rows)).toEqual(Array(ROWS).fill(false));
        expect(drops).toEqual(Array(ROWS).fill({ eventType: 'recording_lookup', reason: 'stopped' }));
        held.answer('all');
        await stopping;
        expect(await r.record(row('run.created'))).toBe(false);
        expect(okSink.written).toEqual([]);
      });
    });
  });
});
