import { AuditRecorder, AuditSink, ScopedAuditRow } from './audit-recorder';

const row = (eventType = 'run.status_changed'): ScopedAuditRow => ({ project: 'p', env: 'e', runId: 'r', functionId: 'f', eventType });

/** A sink whose writes stay pending until the test settles them: a stuck audit table. */
class StuckSink implements AuditSink {
  readonly pending: { resolve: () => void; reject: (e: unknown) => void; signal: AbortSignal }[] = [];
  write(_rows: ScopedAuditRow[], signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => this.pending.push({ resolve, reject, signal }));
  }
}

describe('AuditRecorder', () => {
  let drops: { eventType: string; reason: string }[];
  const onDrop = (eventType: string, reason: string) => drops.push({ eventType, reason });
  beforeEach(() => { drops = []; });

  it('resolves true when the sink acknowledges the row', async () => {
    const sink = new StuckSink();
    const recorder = new AuditRecorder(sink, { onDrop });
    const written = recorder.record(row());
    sink.pending[0].resolve();
    expect(await written).toBe(true);
    expect(drops).toEqual([]);
  });

  it('drops at once, and counts, a write past the backlog of writes running or waiting', async () => {
    const sink = new StuckSink();
    const recorder = new AuditRecorder(sink, { onDrop, backlog: 3, budgetMs: 60_000 });
    const first = [recorder.record(row()), recorder.record(row()), recorder.record(row())];
    expect(recorder.inFlight).toBe(3);
    expect(await recorder.record(row('run.created'))).toBe(false);
    expect(drops).toEqual([{ eventType: 'run.created', reason: 'backlog' }]);
    sink.pending.forEach((p) => p.resolve());
    expect(await Promise.all(first)).toEqual([true, true, true]);
    expect(recorder.inFlight).toBe(0);
  });

  it('drops a write that cannot finish within its budget, and aborts it so it is not written late', async () => {
    jest.useFakeTimers();
    try {
      const sink = new StuckSink();
      const recorder = new AuditRecorder(sink, { onDrop, budgetMs: 5000 });
      const written = recorder.record(row());
      await jest.advanceTimersByTimeAsync(4999);
      expect(drops).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(await written).toBe(false);
      expect(drops).toEqual([{ eventType: 'run.status_changed', reason: 'budget' }]);
      expect(sink.pending[0].signal.aborted).toBe(true);
      expect(recorder.inFlight).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it('counts a failed insert as a drop', async () => {
    const sink = new StuckSink();
    const recorder = new AuditRecorder(sink, { onDrop });
    const written = recorder.record(row());
    sink.pending[0].reject(new Error('table locked'));
    expect(await written).toBe(false);
    expect(drops).toEqual([{ eventType: 'run.status_changed', reason: 'error' }]);
  });

  it('stop ends every pending write and drops every later one, each counted', async () => {
    const sink = new StuckSink();
    const recorder = new AuditRecorder(sink, { onDrop, budgetMs: 60_000 });
    const pending = [recorder.record(row()), recorder.record(row())];
    recorder.stop();
    expect(await Promise.all(pending)).toEqual([false, false]);
    expect(await recorder.record(row('run.created'))).toBe(false);
    expect(drops.map((d) => d.reason)).toEqual(['stopped', 'stopped', 'stopped']);
    expect(sink.pending).toHaveLength(2);
  });
});
