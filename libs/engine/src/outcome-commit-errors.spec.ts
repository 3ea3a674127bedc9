import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as ts from 'typescript';
import { EngineError } from '@ironflow/contracts';
import { EngineMetrics } from '@ironflow/observability';
import { openTestStore, TestStore } from '@ironflow/testing';
import { OUTCOME_UNITS, countOutcomeCommitErrors } from './outcome-commit-errors';

const LIBS = join(__dirname, '..', '..');

async function errorsOf(metrics: EngineMetrics, unit: string): Promise<number> {
  const values = (await metrics.outcomeCommitErrors.get()).values;
  return values.find((v) => v.labels.unit === unit)?.value ?? NaN;
}

/** Each `commitOutcome(…)` or `commitFencedOutcomes(…)` call in `file` with the name of the `unitOfWork('…')` it runs inside, if any. */
function commitSites(file: string): { enclosingUnit?: string; line: number }[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const sites: { enclosingUnit?: string; line: number }[] = [];
  const visit = (node: ts.Node, unit?: string): void => {
    let inner = unit;
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'unitOfWork') {
      const [name] = node.arguments;
      if (name && ts.isStringLiteral(name)) inner = name.text;
    }
    // `unitWithLockLimit(store, '…', limitMs, work)` runs `work` as the unit of work '…'.
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'unitWithLockLimit') {
      const name = node.arguments[1];
      if (name && ts.isStringLiteral(name)) inner = name.text;
    }
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && (node.expression.text === 'commitOutcome' || node.expression.text === 'commitFencedOutcomes')) {
      sites.push({ enclosingUnit: inner, line: sf.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(sf);
  return sites;
}

/** Every `unitOfWork('…')` (or `unitWithLockLimit(store, '…', …)`) name in `file`. */
function unitNames(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/(?:unitOfWork\(|unitWithLockLimit\([^,]+,)\s*'([^']+)'/g)].map((m) => m[1]);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === '__tests__' ? [] : sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('outcome commit errors', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await openTestStore('sqlite');
  });
  afterAll(async () => {
    await store?.dispose();
  });

  it('a unit of work that commits outcomes and fails counts in ironflow_outcome_commit_errors_total by unit; a refusal decided inside it and other units do not', async () => {
    const metrics = new EngineMetrics();
    const counted = countOutcomeCommitErrors(store.store, metrics);
    for (const unit of OUTCOME_UNITS) expect(await errorsOf(metrics, unit)).toBe(0);

    await expect(counted.unitOfWork('applyReport', async () => { throw new Error('connection lost'); })).rejects.toThrow('connection lost');
    await expect(counted.unitOfWork('applyReport', async () => { throw new EngineError('STALE_EXECUTION', 'fenced'); })).rejects.toThrow('fenced');
    // A statement the store refuses: whatever the driver rejects with, the unit fails and counts.
    const refused = await counted.unitOfWork('cancelRun', (tx) => tx.query('SELECT * FROM no_such_table')).then(() => 'committed', (err: unknown) => err);
    expect(refused).not.toBe('committed');
    expect(String(refused)).toMatch(/no_such_table/);
    await expect(counted.unitOfWork('trigger', async () => { throw new Error('not an outcome unit'); })).rejects.toThrow();
    expect(await counted.unitOfWork('recoverLease', async (tx) => (await tx.query<{ one: number }>('SELECT 1 AS one'))[0].one)).toBe(1);

    expect(await errorsOf(metrics, 'applyReport')).toBe(1);
    expect(await errorsOf(metrics, 'cancelRun')).toBe(1);
    expect(await errorsOf(metrics, 'recoverLease')).toBe(0);
    expect(await errorsOf(metrics, 'trigger')).toBeNaN();
    expect(counted.dialect).toBe('sqlite');
  });

  it('OUTCOME_UNITS names exactly the units of work whose source commits an outcome', () => {
    const committing = new Set<string>();
    for (const file of sourceFiles(LIBS).filter((f) => !f.includes(`${join('libs', 'outcome')}`) && !f.includes(join('libs', 'testing')))) {
      const sites = commitSites(file);
      if (sites.length === 0) continue;
      const units = unitNames(file);
      for (const site of sites) {
        // A commit inside a helper method (report-system's `commit`) runs in its file's unit.
        const names = site.enclosingUnit ? [site.enclosingUnit] : units;
        expect([file, site.line, names.length > 0]).toEqual([file, site.line, true]);
        names.forEach((n) => committing.add(n));
      }
    }
    expect([...committing].sort()).toEqual([...OUTCOME_UNITS].sort());
  });
});
