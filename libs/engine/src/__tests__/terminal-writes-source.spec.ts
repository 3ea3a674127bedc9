import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import * as ts from 'typescript';

/**
 * "Only `libs/outcome` writes a terminal status; a test over the source enforces it" (DESIGN.md
 * "Libraries"). This scans every `.ts` file under `libs/` and `apps/` except specs, the test kit,
 * `libs/outcome` itself and generated code, and fails on:
 *
 * - a SQL `UPDATE runs … SET …` (also `INSERT INTO runs … ON CONFLICT … DO UPDATE SET …`) whose
 *   `status` assignment is anything but a non-terminal literal ('waiting_for_capacity', 'running',
 *   'waiting', 'paused'): a terminal literal, a placeholder ($n, ?, :name), an interpolation, a
 *   CASE with any other result, or any other expression (a CASE whose every result, ELSE included,
 *   is a non-terminal literal is allowed) — or a SET clause with a dynamic fragment that cannot be checked;
 * - an `INSERT INTO runs` that inserts a terminal (or non-literal) status;
 * - TypeORM-style `.update(` / `.save(` / `.insert(` / `.upsert(` against runs (a `runs`
 *   repository, `getRepository(Run…)`, or a `'runs'` / `Run…` entity target).
 *
 * SQL is read from the TypeScript AST (string literals, template literals, `+` concatenations),
 * so statements spanning lines are whole, and comments never count.
 */

const ROOT = join(__dirname, '..', '..', '..', '..');
const NON_TERMINAL_LITERAL = /^'(waiting_for_capacity|running|waiting|paused)'$/;

export interface Violation {
  file: string;
  line: number;
  reason: string;
  excerpt: string;
}

interface Scan {
  violations: Violation[];
  /** `UPDATE runs` / `INSERT INTO runs` statements the scanner inspected (to prove it saw them). */
  runsStatements: number;
}

/** Scans one file's source text. */
export function scanSource(file: string, text: string): Scan {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const scan: Scan = { violations: [], runsStatements: 0 };
  const lineOf = (node: ts.Node) => sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;

  const visit = (node: ts.Node): void => {
    const sql = sqlText(node, sf);
    if (sql !== null) {
      for (const problem of checkSql(sql, scan)) {
        scan.violations.push({ file, line: lineOf(node), reason: problem, excerpt: sql.replace(/\s+/g, ' ').slice(0, 200) });
      }
      // A concatenation was read whole; still look inside interpolations for nested statements.
      if (ts.isBinaryExpression(node)) {
        leaves(node).filter((leaf) => !isStringish(leaf)).forEach((leaf) => ts.forEachChild(leaf, visit));
        return;
      }
    }
    if (ts.isCallExpression(node)) {
      const problem = checkOrmCall(node, sf);
      if (problem) scan.violations.push({ file, line: lineOf(node), reason: problem, excerpt: node.getText(sf).replace(/\s+/g, ' ').slice(0, 200) });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return scan;
}

function isStringish(node: ts.Node): boolean {
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node);
}

function leaves(node: ts.Expression): ts.Expression[] {
  const inner = ts.isParenthesizedExpression(node) ? node.expression : node;
  if (ts.isBinaryExpression(inner) && inner.operatorToken.kind === ts.SyntaxKind.PlusToken) return [...leaves(inner.left), ...leaves(inner.right)];
  return [inner];
}

/** The text of a string-like expression, interpolations as `${source}`; `null` for anything else. */
function sqlText(node: ts.Node, sf: ts.SourceFile): string | null {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    // Part of a concatenation: the concatenation is read whole instead.
    if (ts.isBinaryExpression(node.parent) && node.parent.operatorToken.kind === ts.SyntaxKind.PlusToken) return null;
    return node.text;
  }
  if (ts.isTemplateExpression(node)) {
    if (ts.isBinaryExpression(node.parent) && node.parent.operatorToken.kind === ts.SyntaxKind.PlusToken) return null;
    return templateText(node, sf);
  }
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    if (ts.isBinaryExpression(node.parent) && node.parent.operatorToken.kind === ts.SyntaxKind.PlusToken) return null;
    const parts = leaves(node);
    if (!parts.some(isStringish)) return null;
    return parts
      .map((p) => (ts.isStringLiteral(p) || ts.isNoSubstitutionTemplateLiteral(p) ? p.text : ts.isTemplateExpression(p) ? templateText(p, sf) : `\${${p.getText(sf)}}`))
      .join('');
  }
  return null;
}

function templateText(node: ts.TemplateExpression, sf: ts.SourceFile): string {
  return node.head.text + node.templateSpans.map((s) => `\${${s.expression.getText(sf)}}${s.literal.text}`).join('');
}

const TABLE = String.raw`(?:"?\w+"?\.)?"?runs"?`;
const UPDATE_RUNS = new RegExp(String.raw`\bUPDATE\s+(?:ONLY\s+)?(${TABLE}|\$\{[^}]*\})(?:\s+(?:AS\s+)?(?!SET\b)\w+)?\s+SET\b`, 'gi');
const INSERT_RUNS = new RegExp(String.raw`\bINSERT\s+INTO\s+${TABLE}\s*\(`, 'gi');

/** Problems with the SQL in one string; counts the runs statements it inspected. */
export function checkSql(sql: string, scan: { runsStatements: number } = { runsStatements: 0 }): string[] {
  const problems: string[] = [];
  for (const m of sql.matchAll(UPDATE_RUNS)) {
    const dynamicTable = m[1].startsWith('${');
    const clause = setClause(sql, m.index! + m[0].length);
    const found = checkSetClause(clause);
    // An interpolated table name may be any table: flag only a status write that is not a non-terminal literal.
    if (dynamicTable) {
      if (found.some((p) => p.startsWith('status'))) problems.push(...found.map((p) => `UPDATE of an interpolated table (${m[1]}): ${p}`));
      continue;
    }
    scan.runsStatements += 1;
    problems.push(...found.map((p) => `UPDATE runs: ${p}`));
  }
  for (const m of sql.matchAll(INSERT_RUNS)) {
    scan.runsStatements += 1;
    const rest = sql.slice(m.index! + m[0].length);
    problems.push(...checkInsert(rest).map((p) => `INSERT INTO runs: ${p}`));
    const upsert = /\bDO\s+UPDATE\s+SET\b/i.exec(rest);
    if (upsert) problems.push(...checkSetClause(setClause(rest, upsert.index + upsert[0].length)).map((p) => `INSERT INTO runs … DO UPDATE: ${p}`));
  }
  return problems;
}

/** The SET clause from `start` up to a top-level WHERE / RETURNING / FROM / `;` or the end. */
function setClause(sql: string, start: number): string {
  return topLevelUntil(sql, start, (i) => sql[i] === ';' || (/^(WHERE|RETURNING|FROM)\b/i.test(sql.slice(i)) && /\W/.test(sql[i - 1] ?? ' '))).text;
}

/**
 * The text from `start` up to the first top-level position `stopsAt` accepts (`by: 'stop'`), the
 * `)` closing the list `start` is in (`'paren'`) or the end (`'end'`); quoted strings and
 * `${…}` interpolations are skipped whole.
 */
function topLevelUntil(sql: string, start: number, stopsAt: (i: number) => boolean): { text: string; by: 'stop' | 'paren' | 'end' } {
  let depth = 0;
  for (let i = start; i < sql.length; i++) {
    const c = sql[i];
    if (c === "'") { i = skipQuoted(sql, i); continue; }
    if (c === '$' && sql[i + 1] === '{') { i = skipInterpolation(sql, i); continue; }
    if (c === '(') depth++;
    else if (c === ')') { if (depth === 0) return { text: sql.slice(start, i), by: 'paren' }; depth--; }
    else if (depth === 0 && stopsAt(i)) return { text: sql.slice(start, i), by: 'stop' };
  }
  return { text: sql.slice(start), by: 'end' };
}

function skipQuoted(sql: string, i: number): number {
  for (let j = i + 1; j < sql.length; j++) {
    if (sql[j] === "'") { if (sql[j + 1] === "'") { j++; continue; } return j; }
  }
  return sql.length;
}

function skipInterpolation(sql: string, i: number): number {
  let depth = 0;
  for (let j = i + 1; j < sql.length; j++) {
    if (sql[j] === '{') depth++;
    else if (sql[j] === '}') { depth--; if (depth === 0) return j; }
  }
  return sql.length;
}

/** Splits at top-level commas. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'") { i = skipQuoted(text, i); continue; }
    if (c === '$' && text[i + 1] === '{') { i = skipInterpolation(text, i); continue; }
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) { parts.push(text.slice(from, i)); from = i + 1; }
  }
  parts.push(text.slice(from));
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

/**
 * `CASE WHEN … THEN <literal> … ELSE <literal> END` whose every result is a non-terminal literal
 * (e.g. a recovery that parks a run with a pause requested and queues it otherwise); an ELSE is
 * required, and any other result (`status`, a placeholder, a terminal literal) is not allowed.
 */
function nonTerminalCase(value: string): boolean {
  const whole = /^CASE\s+WHEN\s[\s\S]*\sELSE\s+(\S+)\s+END$/i.exec(value);
  if (!whole || !NON_TERMINAL_LITERAL.test(whole[1])) return false;
  const thens = [...value.matchAll(/\bTHEN\s+(\S+)/gi)].map((m) => m[1]);
  return thens.length > 0 && thens.every((result) => NON_TERMINAL_LITERAL.test(result));
}

function checkSetClause(clause: string): string[] {
  const problems: string[] = [];
  for (const item of splitTopLevel(clause)) {
    const assignment = /^(?:"?\w+"?\.)?"?(\w+)"?\s*=\s*([\s\S]*)$/.exec(item);
    if (!assignment) {
      // A fragment such as `${extraSets}` or `(a, b) = (…)`: whatever it writes cannot be checked here.
      problems.push(`status may be written by a SET fragment that cannot be checked: ${item.slice(0, 80)}`);
      continue;
    }
    const [, column, value] = assignment;
    if (column.toLowerCase() !== 'status') continue;
    if (!NON_TERMINAL_LITERAL.test(value.trim()) && !nonTerminalCase(value.trim())) problems.push(`status set to ${value.trim().slice(0, 80)} (only a non-terminal literal is allowed outside libs/outcome)`);
  }
  return problems;
}

/**
 * `(cols) VALUES (vals)` or `(cols) SELECT <list> FROM …`: the status value must be a non-terminal
 * literal, or in a SELECT list also a CASE of non-terminal literals; any other query is refused.
 */
function checkInsert(rest: string): string[] {
  const close = rest.indexOf(')');
  const columns = splitTopLevel(rest.slice(0, close)).map((c) => c.replace(/"/g, '').toLowerCase());
  const statusAt = columns.indexOf('status');
  if (statusAt < 0) return [];
  const values = /^\s*VALUES\s*\(/i.exec(rest.slice(close + 1));
  if (values) {
    const value = splitTopLevel(setClauseLikeParen(rest, close + 1 + values[0].length))[statusAt] ?? '';
    return NON_TERMINAL_LITERAL.test(value) ? [] : [`status inserted as ${value.slice(0, 80)}`];
  }
  const select = /^\s*SELECT\s+/i.exec(rest.slice(close + 1));
  if (!select) return ['a status is inserted from a query that cannot be checked'];
  const list = selectList(rest, close + 1 + select[0].length);
  if (list === null) return ['a status is inserted from a query that cannot be checked'];
  const value = splitTopLevel(list)[statusAt] ?? '';
  return NON_TERMINAL_LITERAL.test(value) || nonTerminalCase(value) ? [] : [`status inserted as ${value.slice(0, 80)}`];
}

/** A SELECT's list from `start` up to its top-level `FROM`; `null` without one (a list ending the statement cannot be told from what follows). */
function selectList(sql: string, start: number): string | null {
  const list = topLevelUntil(sql, start, (i) => /^\sFROM\s/i.test(sql.slice(i, i + 6)));
  return list.by === 'stop' ? list.text : null;
}

/** Text up to the `)` closing a list that starts at `start`. */
function setClauseLikeParen(sql: string, start: number): string {
  return topLevelUntil(sql, start, () => false).text;
}

const ORM_WRITES = new Set(['update', 'save', 'insert', 'upsert']);
const RUNS_TARGET = /^(['"`]runs['"`]|Runs?(Entity|Record|Row)?)$/;

/** TypeORM-style writes against runs. */
function checkOrmCall(call: ts.CallExpression, sf: ts.SourceFile): string | null {
  if (!ts.isPropertyAccessExpression(call.expression)) return null;
  const method = call.expression.name.text;
  if (!ORM_WRITES.has(method)) return null;
  const receiver = call.expression.expression.getText(sf);
  const firstArg = call.arguments[0]?.getText(sf) ?? '';
  if (/getRepository\s*\(\s*(['"`]runs['"`]|Runs?\w*)\s*\)\s*$/.test(receiver)) return `.${method}( on getRepository(runs)`;
  if (/(^|\.)(runs?|run\w*)(Repo|Repository)$/i.test(receiver) || /(^|\.)runs$/.test(receiver)) return `.${method}( on a runs repository (${receiver})`;
  if (RUNS_TARGET.test(firstArg.trim())) return `.${method}(${firstArg}, …) targets runs`;
  return null;
}

function listSources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const rel = relative(ROOT, path).split(sep).join('/');
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    if (rel === 'libs/testing' || rel === 'libs/outcome' || rel === 'libs/contracts/src/gen') continue;
    if (statSync(path).isDirectory()) listSources(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.spec.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

describe('terminal writes in the source', () => {
  it('only libs/outcome writes a terminal status to runs (SQL or TypeORM) in libs/ and apps/', () => {
    const files = [...listSources(join(ROOT, 'libs')), ...listSources(join(ROOT, 'apps'))];
    expect(files.length).toBeGreaterThan(20);
    let runsStatements = 0;
    const violations: Violation[] = [];
    for (const file of files) {
      const scan = scanSource(relative(ROOT, file), readFileSync(file, 'utf8'));
      runsStatements += scan.runsStatements;
      violations.push(...scan.violations);
    }
    // The store's own runs statements were seen (claim, retry, waiting, continuation ×2, wake flag, insert).
    expect(runsStatements).toBeGreaterThanOrEqual(7);
    expect(violations).toEqual([]);
  });

  it('self-check: the scanner flags libs/outcome’s own terminal writes (one run, and a group)', () => {
    for (const name of ['outcome.ts', 'fenced-outcomes.ts']) {
      const file = join(ROOT, 'libs', 'outcome', 'src', name);
      const scan = scanSource(`libs/outcome/src/${name}`, readFileSync(file, 'utf8'));
      // Both take their SET list from `terminalAssignments`, a fragment the scanner refuses to trust.
      expect(scan.violations.map((v) => v.reason)).toEqual([expect.stringContaining('SET fragment that cannot be checked')]);
    }
  });

  describe('self-check on snippets that write a terminal status', () => {
    const flagged: [string, string][] = [
      ['a terminal literal, statement over several lines', "const q = `UPDATE runs\n  SET version = version + 1,\n      status = 'completed',\n      ended_at = $2\n  WHERE id = $1`;"],
      ['a numbered placeholder', "tx.query(`UPDATE runs SET status = $2, updated_at = $3 WHERE id = $1`, [id, s, now]);"],
      ['a positional placeholder', "db.run('UPDATE runs SET status = ? WHERE id = ?', [s, id]);"],
      ['a named parameter', "qb.query('UPDATE runs SET status = :status WHERE id = :id');"],
      ['an interpolated value', "tx.query(`UPDATE runs SET status = ${status} WHERE id = $1`);"],
      ['a quoted, schema-qualified table with an alias', "tx.query(`UPDATE public.\"runs\" AS r SET status = 'cancelled' WHERE r.id = $1`);"],
      ['a CASE expression', "tx.query(`UPDATE runs SET status = CASE WHEN $2 THEN 'failed' ELSE status END WHERE id = $1`);"],
      ['a CASE with one terminal result', "tx.query(`UPDATE runs SET status = CASE WHEN pause_requested = 1 THEN 'paused' WHEN $2 THEN 'cancelled' ELSE 'waiting' END WHERE id = $1`);"],
      ['a CASE without ELSE', "tx.query(`UPDATE runs SET status = CASE WHEN pause_requested = 1 THEN 'paused' END WHERE id = $1`);"],
      ['a concatenation', "tx.query('UPDATE runs SET version = version + 1, ' + \"status = 'failed' \" + 'WHERE id = $1');"],
      ['a dynamic SET fragment', "tx.query(`UPDATE runs SET version = version + 1, ${done ? `status = 'failed'` : ''} WHERE id = $1`);"],
      ['lower-case SQL', "tx.query(`update runs set status = 'completed' where id = $1`);"],
      ['an insert of a terminal run', "tx.query(`INSERT INTO runs (id, status, version) VALUES ($1, 'failed', 1)`);"],
      ['an upsert that copies the status', "tx.query(`INSERT INTO runs (id, status) VALUES ($1, 'running') ON CONFLICT (id) DO UPDATE SET status = excluded.status`);"],
      ['an insert … select of a terminal run', "tx.query(`INSERT INTO runs (id, status, version) SELECT $1, 'completed', 1 FROM events WHERE id = $2`);"],
      ['an insert … select of a status placeholder', "tx.query(`INSERT INTO runs (id, status) SELECT id, $2 FROM events WHERE id = $1`);"],
      ['an insert … select with a terminal CASE result', "tx.query(`INSERT INTO runs (id, status) SELECT id, CASE WHEN $2 THEN 'running' ELSE 'failed' END FROM events`);"],
      ['an insert … select without FROM', "tx.query(`INSERT INTO runs (id, status) SELECT $1, $2`);"],
      ['an interpolated table name', "tx.query(`UPDATE ${table} SET status = 'completed' WHERE id = $1`);"],
      ['TypeORM getRepository(Run).update', "await ds.getRepository(RunEntity).update({ id }, { status: 'completed' });"],
      ['TypeORM manager.save(Run, …)', "await manager.save(Run, { id, status: 'failed' });"],
      ['TypeORM runRepository.save', 'await this.runRepository.save(run);'],
      ['TypeORM query builder update(Run)', "await ds.createQueryBuilder().update(Run).set({ status: 'cancelled' }).where('id = :id', { id }).execute();"],
      ['TypeORM update on the runs table name', "await manager.update('runs', { id }, { status: 'cancelled' });"],
    ];
    it.each(flagged)('flags %s', (_name, snippet) => {
      expect(scanSource('snippet.ts', snippet).violations).not.toEqual([]);
    });

    const allowed: [string, string][] = [
      ['a non-terminal literal with terminal statuses in WHERE', "tx.query(`UPDATE runs SET status = 'running', execution_seq = execution_seq + 1\n WHERE id = $1 AND status NOT IN ('completed', 'failed', 'cancelled') RETURNING *`);"],
      ['a CASE of non-terminal literals', "tx.query(`UPDATE runs SET status = CASE WHEN pause_requested = 1 THEN 'paused' ELSE 'waiting_for_capacity' END, recoveries = recoveries + 1 WHERE id = $1`);"],
      ['other columns only', 'tx.query(`UPDATE runs SET wake_pending = 0 WHERE id = $1 AND wake_pending = 1`);'],
      ['interpolated values in other columns', "tx.query(`UPDATE runs SET available_at = ${at}, status = 'waiting_for_capacity' WHERE id = $1`);"],
      ['a status placeholder on another table', 'tx.query(`UPDATE steps SET status = $4, output = $5 WHERE run_id = $1`);'],
      ['a comment describing a terminal write', "// UPDATE runs SET status = 'completed' WHERE id = $1\n/* UPDATE runs SET status = $2 */\nconst x = 1;"],
      ['a subquery in SET with its own WHERE', "tx.query(`UPDATE runs SET recoveries = (SELECT COUNT(*) FROM leases WHERE run_id = $1), status = 'waiting' WHERE id = $1`);"],
      ['an insert of a queued run', "tx.query(`INSERT INTO runs (id, status, version) VALUES ($1, 'waiting_for_capacity', 1) RETURNING *`);"],
      ['an insert … select of a CASE of non-terminal literals', "tx.query(`INSERT INTO runs (id, status, version) SELECT ev.id, CASE WHEN c.yes THEN 'running' ELSE 'waiting_for_capacity' END, CASE WHEN c.yes THEN 2 ELSE 1 END FROM ev, c WHERE $1::text IS NOT NULL RETURNING *`);"],
      ['hash.update and other unrelated .update calls', "createHash('sha256').update(body); this.cache.save(key);"],
    ];
    it.each(allowed)('allows %s', (_name, snippet) => {
      expect(scanSource('snippet.ts', snippet).violations).toEqual([]);
    });
  });
});
