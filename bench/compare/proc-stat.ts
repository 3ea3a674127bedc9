import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** CPU time (user + system, ms) a process has used so far, from `/proc/<pid>/stat`; undefined when it is gone. */
export function cpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) can hold spaces: the fields after it start past the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]); // field 14
    const stime = Number(fields[12]); // field 15
    return ((utime + stime) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** CPU ms of each named group of processes (a group's pids summed). */
export function cpuSnapshot(groups: Record<string, number[]>): Record<string, Map<number, number>> {
  const snap: Record<string, Map<number, number>> = {};
  for (const [name, pids] of Object.entries(groups)) {
    snap[name] = new Map();
    for (const pid of pids) {
      const ms = cpuMs(pid);
      if (ms !== undefined) snap[name].set(pid, ms);
    }
  }
  return snap;
}

/** CPU ms each group used between two snapshots (a pid missing at the start counts from 0). */
export function cpuDelta(before: Record<string, Map<number, number>>, after: Record<string, Map<number, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pids] of Object.entries(after)) {
    let sum = 0;
    for (const [pid, ms] of pids) sum += ms - (before[name]?.get(pid) ?? 0);
    out[name] = sum;
  }
  return out;
}
