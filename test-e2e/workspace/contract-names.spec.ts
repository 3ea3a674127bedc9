/**
 * Every contract test the specification names (CONTRACT-TESTS.md, copied from
 * `../shared/CONTRACT-TESTS.md` into `docs/`) is a test of ours with that exact name in its title
 * (issue 10: "a test fails when a name in CONTRACT-TESTS.md has no test"). A name this engine cannot
 * express yet is listed in `NOT_WRITTEN` with the reason; the list may only shrink: a listed name
 * that gains a test fails here too, so the list never hides a written test.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { repoRoot } from '../support/helm';

/** Names without a test, and why (say it in the release note too). */
const NOT_WRITTEN: Record<string, string> = {};

function contractNames(): string[] {
  const table = readFileSync(join(repoRoot, 'docs', 'CONTRACT-TESTS.md'), 'utf8');
  return [...table.matchAll(/^\| \d+ \| `(Test[A-Za-z_*]+)` \|/gm)].map((m) => m[1]);
}

function specFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (entry === 'node_modules' || entry === 'dist') return [];
    if (statSync(path).isDirectory()) return specFiles(path);
    return entry.endsWith('.spec.ts') ? [path] : [];
  });
}

describe('the contract tests the specification names', () => {
  const names = contractNames();
  const sources = ['libs', 'apps', 'test-e2e']
    .flatMap((dir) => specFiles(join(repoRoot, dir)))
    .filter((file) => !file.endsWith('contract-names.spec.ts'))
    .map((file) => ({ file: relative(repoRoot, file), text: readFileSync(file, 'utf8') }));
  const hasTest = (name: string) => {
    const prefix = name.endsWith('*') ? name.slice(0, -1) : name;
    // A title is a string literal that starts with the name (`it('Name: …'`, `it.each(…)('Name: %s'`).
    return sources.some(({ text }) => new RegExp(`['\`"]${prefix}`).test(text));
  };

  it('reads all 90 names from CONTRACT-TESTS.md', () => {
    expect(names).toHaveLength(90);
    expect(names[0]).toBe('TestPostCommit_CrashBeforeParentWakeRecovers');
    expect(names[89]).toBe('TestResultPublishFailurePolicyAtEveryDoor');
  });

  it('every name has a test whose title starts with it, except the ones listed as not written', () => {
    const missing = names.filter((name) => !hasTest(name));
    expect(missing.sort()).toEqual(Object.keys(NOT_WRITTEN).sort());
  });
});
