import { Client } from 'pg';
import { DATABASE_URL, sleep } from '../lib/common';

/**
 * Counts write transactions cluster-wide: PostgreSQL assigns a transaction id only to a
 * transaction that writes (or locks a row, `FOR SHARE` / `FOR UPDATE`), so the advance of
 * `pg_snapshot_xmax(pg_current_snapshot())` over a window is the number of such transactions that
 * ended in it, in every database. Reading the snapshot assigns no id, so the counter's own reads
 * do not count. It holds one connection to the admin database (`IRONFLOW_BENCH_DATABASE_URL`).
 *
 * Other work on the same server (another system's idle passes, other suites) also takes ids, so
 * a figure is the window's ids less the idle rate measured by {@link idleRate}, and
 * {@link perCall} measures in slices and takes the median slice, which a burst of someone else's
 * writes during one slice does not move.
 */
export class WriteTransactionCounter {
  private constructor(private readonly client: Client) {}

  static async open(): Promise<WriteTransactionCounter> {
    const client = new Client({ connectionString: DATABASE_URL });
    await client.connect();
    return new WriteTransactionCounter(client);
  }

  /** The next transaction id not yet ended (the snapshot's xmax), as a number. */
  async xmax(): Promise<number> {
    const rows = await this.client.query<{ x: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x');
    return Number(rows.rows[0].x);
  }

  /**
   * Ids taken per ms while the system idles: the median over `slices` windows of `sliceMs`
   * (a burst of other work in one window does not move it).
   */
  async idleRate(slices: number, sliceMs: number): Promise<{ perMs: number; slicesPerSec: number[] }> {
    const rates: number[] = [];
    let x0 = await this.xmax();
    let t0 = Date.now();
    for (let i = 0; i < slices; i += 1) {
      await sleep(sliceMs);
      const x1 = await this.xmax();
      const t1 = Date.now();
      rates.push((x1 - x0) / Math.max(1, t1 - t0));
      x0 = x1;
      t0 = t1;
    }
    return { perMs: median(rates), slicesPerSec: rates.map((r) => round(r * 1000)) };
  }

  /**
   * Runs `calls` in `slices` slices (`call(n)` makes n calls and resolves with how many ended)
   * and returns the write transactions per call: per slice, the ids taken from its first call
   * until `settleMs` after its last (so the writes that follow a call after it returned, such as
   * its audit rows, count with it) less `idlePerMs` over that time, divided by its calls; the
   * median of the slices (and each slice's figure).
   */
  async perCall(
    calls: number,
    slices: number,
    settleMs: number,
    idlePerMs: number,
    call: (n: number) => Promise<number>,
  ): Promise<{ perCall: number; slices: number[] }> {
    const figures: number[] = [];
    let left = calls;
    for (let i = 0; i < slices && left > 0; i += 1) {
      const n = Math.ceil(left / (slices - i));
      left -= n;
      const x0 = await this.xmax();
      const t0 = Date.now();
      const ended = await call(n);
      await sleep(settleMs);
      const x1 = await this.xmax();
      const t1 = Date.now();
      if (ended > 0) figures.push((x1 - x0 - idlePerMs * (t1 - t0)) / ended);
    }
    return { perCall: round(median(figures)), slices: figures.map(round) };
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const round = (v: number) => Math.round(v * 100) / 100;
