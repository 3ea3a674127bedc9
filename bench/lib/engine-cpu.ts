import { TestEngine } from '@ironflow/testing';
import { Tx } from '@ironflow/store';
import { cpuMs } from '../compare/proc-stat';

/** The pool's backend pids: `size` units held open at once, each on a connection of its own (read before each pass: the pool may have replaced some). */
export async function backendPids(t: TestEngine, size: number): Promise<number[]> {
  let open = 0;
  let release!: () => void;
  const all = new Promise<void>((resolve) => (release = resolve));
  const pids = await Promise.all(Array.from({ length: size }, () => t.db.store.unitOfWork('bench.pid', async (tx: Tx) => {
    const [row] = await tx.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`);
    open += 1;
    if (open === size) release();
    await all;
    return Number(row.pid);
  })));
  return [...new Set(pids)];
}

/** Counts the statements of every unit of work of `t`'s store (`count`), and the units by name (`units`); the bench resets both between passes. */
export function countStatements(t: TestEngine): { count: number; units: Map<string, number> } {
  const counter = { count: 0, units: new Map<string, number>() };
  const store = t.faults;
  const unitOfWork = store.unitOfWork.bind(store);
  store.unitOfWork = (name, work, options) => {
    counter.units.set(name, (counter.units.get(name) ?? 0) + 1);
    return unitOfWork(name, (tx) => work({ ...tx, query: (sql, p) => (counter.count++, tx.query(sql, p)), execute: (sql, p) => (counter.count++, tx.execute(sql, p)) }), options);
  };
  return counter;
}

/**
 * Calls `call(i)` for i in 0…`count`-1 with `inflight` callers, then drains `t`'s follow-ups (60 s
 * at most); returns the wall time (ms) and the CPU (ms) of this process (the engine) and of the
 * backends `pids` over it.
 */
export async function inFlight(t: TestEngine, pids: number[], inflight: number, count: number, call: (i: number) => Promise<unknown>): Promise<{ ms: number; engineCpuMs: number; postgresCpuMs: number }> {
  const pg0 = pids.map((p) => cpuMs(p) ?? 0);
  const cpu0 = process.cpuUsage();
  const started = Date.now();
  let next = 0;
  await Promise.all(Array.from({ length: inflight }, async () => {
    while (next < count) await call(next++);
  }));
  await t.engine.resources.followUps.drain(60_000);
  const cpu = process.cpuUsage(cpu0);
  return {
    ms: Date.now() - started,
    engineCpuMs: (cpu.user + cpu.system) / 1000,
    postgresCpuMs: pids.reduce((sum, p, i) => sum + ((cpuMs(p) ?? 0) - pg0[i]), 0),
  };
}
