import { Store, Tx, UnitOptions } from '@ironflow/store';

interface Tally {
  count: number;
  totalMs: number;
}

/**
 * A store that counts the engine's units of work and reads by name, with the time each took from
 * the call until it settled (pool wait included): what each benchmark call costs the database.
 */
export class CountingStore implements Store {
  private readonly units = new Map<string, Tally>();
  private readonly reads = new Map<string, Tally>();

  constructor(private readonly inner: Store) {}

  get dialect() {
    return this.inner.dialect;
  }

  unitOfWork<T>(name: string, work: (tx: Tx) => Promise<T>, options?: UnitOptions): Promise<T> {
    return timed(this.units, name, () => this.inner.unitOfWork(name, work, options));
  }

  read<T>(name: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    return timed(this.reads, name, () => this.inner.read(name, work));
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  snapshot(): { units: Record<string, Tally>; reads: Record<string, Tally> } {
    const copy = (m: Map<string, Tally>) => Object.fromEntries([...m].map(([k, v]) => [k, { ...v }]));
    return { units: copy(this.units), reads: copy(this.reads) };
  }
}

async function timed<T>(tallies: Map<string, Tally>, name: string, work: () => Promise<T>): Promise<T> {
  const started = process.hrtime.bigint();
  try {
    return await work();
  } finally {
    const tally = tallies.get(name) ?? { count: 0, totalMs: 0 };
    tally.count += 1;
    tally.totalMs += Number(process.hrtime.bigint() - started) / 1e6;
    tallies.set(name, tally);
  }
}

/** Per name between two snapshots: how many per call, and the mean time of one (ms), rounded to 0.01. */
export function perCall(before: Record<string, Tally>, after: Record<string, Tally>, calls: number): Record<string, { perCall: number; meanMs: number }> {
  const out: Record<string, { perCall: number; meanMs: number }> = {};
  const r = (v: number) => Math.round(v * 100) / 100;
  for (const [name, t] of Object.entries(after)) {
    const count = t.count - (before[name]?.count ?? 0);
    const ms = t.totalMs - (before[name]?.totalMs ?? 0);
    if (count > 0) out[name] = { perCall: r(count / calls), meanMs: r(ms / count) };
  }
  return out;
}
