/**
 * SQL is written once, PostgreSQL-style (`$1`, `$2` …). The SQLite adapter rewrites the numbered
 * placeholders to positional `?` and reorders the parameters, so one statement serves both stores.
 */
export type Dialect = 'postgres' | 'sqlite';

export function toPositional(sql: string, params: readonly unknown[]): { sql: string; params: unknown[] } {
  const ordered: unknown[] = [];
  const text = sql.replace(/\$(\d+)/g, (_m, n: string) => {
    const index = Number(n) - 1;
    if (index < 0 || index >= params.length) throw new Error(`SQL placeholder $${n} has no parameter`);
    ordered.push(params[index]);
    return '?';
  });
  return { sql: text, params: ordered.map(toSqliteValue) };
}

function toSqliteValue(value: unknown): unknown {
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}

/** Builds `$k, $k+1, …` for an IN list whose values are appended at position `start` (1-based). */
export function placeholders(start: number, count: number): string {
  return Array.from({ length: count }, (_v, i) => `$${start + i}`).join(', ');
}

/** A statement's text (numbered placeholders from `$1`) with its parameters. */
export interface Statement {
  sql: string;
  params: unknown[];
}

/** `Tx.queryTogether` where statements go one at a time: each runs after the one before it ends. */
export async function oneAfterAnother(
  execute: (sql: string, params: readonly unknown[]) => Promise<{ rows: Record<string, unknown>[] }>,
  statements: readonly Statement[],
): Promise<Record<string, unknown>[][]> {
  const out: Record<string, unknown>[][] = [];
  for (const { sql, params } of statements) out.push((await execute(sql, params)).rows);
  return out;
}

/**
 * `statements` as parts of one statement (PostgreSQL CTEs, issue 11): each one's placeholders are
 * renumbered to follow the parameters of those before it. Returns the renumbered texts, in order,
 * and all the parameters.
 */
export function numberedTogether(statements: Statement[]): { texts: string[]; params: unknown[] } {
  const params: unknown[] = [];
  const texts = statements.map(({ sql, params: own }) => {
    const offset = params.length;
    params.push(...own);
    return sql.replace(/\$(\d+)/g, (_m, n: string) => `$${Number(n) + offset}`);
  });
  return { texts, params };
}
