/**
 * A `pg` statement counter, preloaded into a service process by `bench/compare`
 * (`NODE_OPTIONS=--require …/pg-statements.js`, with `IRONFLOW_BENCH_PG_STATEMENTS=<file>`).
 *
 * It counts every `Client.query` the process sends (BEGIN, COMMIT and ROLLBACK included), by the
 * statement's text (its first 120 characters, whitespace collapsed), and writes the counts to the
 * file every 500 ms while they change: `{ total, byText: { text: count } }` (a write costs the
 * process ~0.2 ms of CPU; every 100 ms that was ~2 ms/s in each service, paid five times by the
 * cluster). The benchmark reads the files around a phase (`readStatementCounts`). The module does
 * nothing without the variable.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';

export interface StatementCounts {
  total: number;
  byText: Record<string, number>;
}

/** The counts a preloaded counter last wrote to `file` (zero when it wrote none yet). */
export function readStatementCounts(file: string): StatementCounts {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as StatementCounts;
  } catch {
    return { total: 0, byText: {} };
  }
}

/** `after − before`, per text (texts with no change left out). */
export function statementDelta(before: StatementCounts, after: StatementCounts): StatementCounts {
  const byText: Record<string, number> = {};
  for (const [text, n] of Object.entries(after.byText)) {
    const d = n - (before.byText[text] ?? 0);
    if (d !== 0) byText[text] = d;
  }
  return { total: after.total - before.total, byText };
}

/** The period of the counter's writes, ms. */
export const STATEMENT_FLUSH_MS = 500;

function install(file: string): void {
  // Resolved from the process's own tree, as TypeORM resolves it.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pg = require(require.resolve('pg', { paths: [process.cwd(), __dirname] })) as { Client: { prototype: { query: (...args: unknown[]) => unknown } } };
  const counts: StatementCounts = { total: 0, byText: {} };
  // Each text's key, made once: the service's texts are few, and the counter is not to cost its CPU figures a regex per statement.
  const keys = new Map<string, string>();
  let dirty = false;
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string } | undefined;
    const raw = typeof first === 'string' ? first : first?.text;
    if (raw !== undefined) {
      let text = keys.get(raw);
      if (text === undefined) {
        text = raw.replace(/\s+/g, ' ').trim().slice(0, 120);
        if (keys.size < 10_000) keys.set(raw, text);
      }
      counts.total += 1;
      counts.byText[text] = (counts.byText[text] ?? 0) + 1;
      dirty = true;
    }
    return original.apply(this, args);
  };
  const flush = () => {
    if (!dirty) return;
    dirty = false;
    writeFileSync(`${file}.tmp`, JSON.stringify(counts));
    renameSync(`${file}.tmp`, file);
  };
  setInterval(flush, STATEMENT_FLUSH_MS).unref();
  process.once('exit', flush);
}

const target = process.env.IRONFLOW_BENCH_PG_STATEMENTS;
if (target) install(target);
