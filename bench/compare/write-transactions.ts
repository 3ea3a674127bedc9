import { Client } from 'pg';
import { DATABASE_URL, sleep } from '../lib/common';

/**
 * Counts write transactions cluster-wide: PostgreSQL assigns a transaction id only to a
 * transaction that writes (or locks a row, `FOR SHARE` / `FOR UPDATE`), so the advance of
 * `pg_snapshot_xmax(pg_current_snapshot())` over a window is the number of such transactions that
 * ended in it, in every database. Reading the snapshot assigns no id, so the counter's own reads
 * do not count. It holds one connection to the admin database (`IRONFLOW_BENCH_DATABASE_URL`).
 *
 * Other work on the same server (other suites) also takes ids, and only ever adds to a count, so
 * the quietest window is the closest: the idle rate is the lowest of {@link idleRate}'s windows
 * (the system's own idle writes and the least of the others'), and {@link perCall} measures in
 * slices and keeps the lowest slice less that rate.
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

  /** Ids taken per ms while the system idles: the lowest of `slices` windows of `sliceMs` (and each window's rate, per s). */
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
    return { perMs: Math.min(...rates), slicesPerSec: rates.map((r) => round(r * 1000)) };
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
  ): Promise<{ perCall: number; slices: number[]; from: number; to: number }> {
    const figures: number[] = [];
    const from = await this.xmax();
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
    return { perCall: round(Math.min(...figures)), slices: figures.map(round), from, to: await this.xmax() };
  }

  /**
   * Write transactions that left a row version in `database` (PostgreSQL, same server): the
   * distinct `xmin` of the rows of every user table whose transaction id lies in [`from`, `to`).
   * Exact for that database, whatever other suites do, and a lower bound: a transaction whose
   * rows a later one overwrote or deleted (a claim's run row and lease, say) leaves none.
   */
  async leftRowVersions(database: string, from: number, to: number): Promise<number> {
    const url = new URL(DATABASE_URL);
    url.pathname = `/${database}`;
    const client = new Client({ connectionString: url.toString() });
    await client.connect();
    try {
      const tables = await client.query<{ t: string }>(
        `SELECT format('%I.%I', n.nspname, c.relname) AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`,
      );
      if (tables.rows.length === 0) return 0;
      // xmin is 32 bits; `from` and `to` carry the epoch.
      const union = tables.rows.map((r) => `SELECT xmin::text::bigint AS x FROM ${r.t}`).join(' UNION ');
      const rows = await client.query<{ n: string }>(`SELECT COUNT(DISTINCT x) AS n FROM (${union}) v WHERE x >= $1 AND x < $2`, [from % 2 ** 32, to % 2 ** 32]);
      return Number(rows.rows[0].n);
    } finally {
      await client.end();
    }
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

const round = (v: number) => Math.round(v * 100) / 100;
