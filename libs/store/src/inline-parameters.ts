import { escapeLiteral } from 'pg';
// The driver's own conversion of a parameter to its text form (arrays, JSON objects, numbers…).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (value: unknown) => unknown };

/**
 * `sql` with its `$n` placeholders replaced by `params` as quoted literals, for PostgreSQL's simple
 * protocol, where a statement can share one round trip with the statements sent before it (a
 * unit's `START TRANSACTION` or its `SET LOCAL lock_timeout`; issue 11). Each value is first
 * converted to text exactly as the `pg` driver converts a parameter (`prepareValue`), then quoted
 * (`escapeLiteral`), or written `NULL`. The driver sends parameters as untyped text, and a quoted
 * literal is untyped text as well, so PostgreSQL resolves both types alike. `undefined` when the
 * text cannot be inlined safely, and the statement must go as parameters:
 * - a value that does not convert to a string: a `Buffer` or typed array (binary);
 * - a value whose text holds U+0000, which a simple query cannot carry (with parameters PostgreSQL
 *   refuses it with a data exception, which the store turns into `VALIDATION_ERROR`);
 * - a text with a dollar-quoted string (`$$`, `$tag$`) or a name holding `$`, which the scan
 *   below does not follow;
 * - a placeholder with no value.
 * Placeholders inside quoted strings, quoted identifiers and comments are left as they are.
 */
export function inlineParameters(sql: string, params: readonly unknown[]): string | undefined {
  const literals: string[] = [];
  for (const param of params) {
    const text = prepareValue(param);
    if (text === null) literals.push('NULL');
    else if (typeof text !== 'string' || text.includes('\u0000')) return undefined;
    else literals.push(escapeLiteral(text));
  }
  let out = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    const next = sql[i + 1];
    let end: number;
    if (c === "'" || c === '"') end = closingQuote(sql, i, c === "'" && /[eE]/.test(sql[i - 1] ?? ''));
    else if (c === '-' && next === '-') end = lineEnd(sql, i);
    else if (c === '/' && next === '*') end = commentEnd(sql, i);
    else if (c === '$' && /[\w$]/.test(sql[i - 1] ?? '')) return undefined; // `$` inside a name (`a$1`)
    else if (c === '$' && next !== undefined && /\d/.test(next)) {
      const digits = /^\$(\d+)/.exec(sql.slice(i))!;
      const literal = literals[Number(digits[1]) - 1];
      if (literal === undefined) return undefined;
      out += literal;
      i += digits[0].length;
      continue;
    } else if (c === '$') return undefined; // a dollar-quoted string
    else end = i + 1;
    out += sql.slice(i, end);
    i = end;
  }
  return out;
}

/** The index after the quote that closes the one at `start` (`''` or `""` inside is the quote itself; `\` escapes in an `E''` string). */
function closingQuote(sql: string, start: number, backslashEscapes: boolean): number {
  const quote = sql[start];
  let i = start + 1;
  while (i < sql.length) {
    if (backslashEscapes && sql[i] === '\\') i += 2;
    else if (sql[i] === quote && sql[i + 1] === quote) i += 2;
    else if (sql[i] === quote) return i + 1;
    else i += 1;
  }
  return sql.length;
}

function lineEnd(sql: string, start: number): number {
  const end = sql.indexOf('\n', start);
  return end === -1 ? sql.length : end;
}

function commentEnd(sql: string, start: number): number {
  const end = sql.indexOf('*/', start + 2);
  return end === -1 ? sql.length : end + 2;
}
