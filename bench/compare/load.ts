import { nowMs } from '../lib/common';

/** What one load phase measured: calls that ended inside the window, their latencies (ms), failures. */
export interface PhaseResult {
  completed: number;
  failed: number;
  firstError?: string;
  /** The window in ms: calls started after it are not made, calls ending after it are not counted. */
  elapsedMs: number;
  latenciesMs: number[];
}

/**
 * A closed loop: `inflight` callers, each calling `call` again as soon as its last call ended,
 * for `durationMs`. Counts the calls that ended inside the window (a call still running at the end
 * is awaited and not counted). `onCompleted` sees the running count.
 */
export async function closedLoop(inflight: number, durationMs: number, call: (i: number) => Promise<unknown>, onCompleted?: (n: number) => void): Promise<PhaseResult> {
  const started = nowMs();
  const deadline = started + durationMs;
  const result: PhaseResult = { completed: 0, failed: 0, elapsedMs: durationMs, latenciesMs: [] };
  let next = 0;
  const caller = async () => {
    while (nowMs() < deadline) {
      const i = next++;
      const t0 = nowMs();
      try {
        await call(i);
        const t1 = nowMs();
        if (t1 <= deadline) {
          result.completed += 1;
          result.latenciesMs.push(t1 - t0);
          onCompleted?.(result.completed);
        }
      } catch (err) {
        result.failed += 1;
        result.firstError ??= err instanceof Error ? err.message : String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: inflight }, caller));
  return result;
}

/** `n` calls one after the other; the window is the time they took. */
export async function sequential(n: number, call: (i: number) => Promise<unknown>, onCompleted?: (n: number) => void): Promise<PhaseResult> {
  const started = nowMs();
  const result: PhaseResult = { completed: 0, failed: 0, elapsedMs: 0, latenciesMs: [] };
  for (let i = 0; i < n; i += 1) {
    const t0 = nowMs();
    try {
      await call(i);
      result.completed += 1;
      result.latenciesMs.push(nowMs() - t0);
      onCompleted?.(result.completed);
    } catch (err) {
      result.failed += 1;
      result.firstError ??= err instanceof Error ? err.message : String(err);
    }
  }
  result.elapsedMs = nowMs() - started;
  return result;
}

/** The workloads every system runs: a one-step run, a parent that invokes a one-step child. */
export type Workload = 'one-step' | 'parent-child';

/** A request to run one phase (the DBOS peer receives it over IPC). */
export type PhaseRequest =
  | { kind: 'closed'; workload: Workload; inflight: number; durationMs: number }
  | { kind: 'sequential'; workload: Workload; n: number };

/** Runs `request` with `call` as the workload's one call. */
export function runPhase(request: PhaseRequest, call: (workload: Workload, i: number) => Promise<unknown>, onCompleted?: (n: number) => void): Promise<PhaseResult> {
  const one = (i: number) => call(request.workload, i);
  return request.kind === 'closed' ? closedLoop(request.inflight, request.durationMs, one, onCompleted) : sequential(request.n, one, onCompleted);
}
