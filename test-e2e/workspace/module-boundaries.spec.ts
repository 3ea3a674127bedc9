/**
 * The Nx workspace (DESIGN.md "Libraries"): every lib, app, the example, the benchmarks and the
 * e2e tests are Nx projects tagged with their layer; ESLint's `@nx/enforce-module-boundaries`
 * holds every import to the layer rules of tools/nx/layers.js; the project graph is the graph of
 * production imports (tools/nx/production-dependencies.js), so a lib's change reaches exactly
 * its dependents; the build leaves the test doubles out. All offline: no daemon, no Nx Cloud.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ts from 'typescript';
import { repoRoot } from '../support/helm';
import { nx } from '../support/nx';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { LIBS, MAY_IMPORT, TEST_FILE } = require('../../tools/nx/layers') as { LIBS: string[]; MAY_IMPORT: Record<string, string[]>; TEST_FILE: RegExp };

interface ProjectGraph {
  nodes: Record<string, { data: { root: string; tags?: string[]; targets: Record<string, any>; implicitDependencies?: string[] } }>;
  dependencies: Record<string, { source: string; target: string; type: string }[]>;
}

interface LintResult {
  filePath: string;
  messages: { ruleId: string | null; severity: number; message: string; line: number }[];
}

/** Runs a Node script in its own process from the repository root, `input` as JSON on stdin; resolves its stdout parsed as JSON. */
function nodeScript<T>(script: string, input: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, ['-e', script], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' } }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`));
      resolve(JSON.parse(stdout) as T);
    });
    child.stdin?.end(JSON.stringify(input));
  });
}

/**
 * ESLint with the workspace's config, as `npm run lint` runs it, in its own process (its config
 * loader imports modules, which Jest's module system does not allow): lints `files`, and each of
 * `texts` as if it were the file it names.
 */
function eslint(request: { files?: string[]; texts?: { file: string; code: string }[] }): Promise<LintResult[]> {
  return nodeScript<LintResult[]>(
    `const { ESLint } = require('eslint');
     let input = '';
     process.stdin.on('data', (c) => (input += c)).on('end', async () => {
       const { files = [], texts = [] } = JSON.parse(input);
       const eslint = new ESLint();
       const results = files.length ? await eslint.lintFiles(files) : [];
       for (const { file, code } of texts) results.push(...(await eslint.lintText(code, { filePath: file })));
       process.stdout.write(JSON.stringify(results.map((r) => ({ filePath: r.filePath, messages: r.messages }))));
     });`,
    request,
  );
}

const APPS = ['api-gateway', 'dispatcher', 'scheduler', 'capacity-scanner', 'audit-writer', 'ironflow'];
const RULE = '@nx/enforce-module-boundaries';

let graph: ProjectGraph;

/** The projects `project` depends on, directly or not (project graph edges, npm nodes left out). */
function dependencyClosure(project: string): Set<string> {
  const seen = new Set<string>();
  const stack = [project];
  while (stack.length) {
    for (const dep of graph.dependencies[stack.pop()!] ?? []) {
      if (dep.target.startsWith('npm:') || seen.has(dep.target)) continue;
      seen.add(dep.target);
      stack.push(dep.target);
    }
  }
  return seen;
}

function filesUnder(dir: string): string[] {
  return readdirSync(join(repoRoot, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === 'node_modules' ? [] : filesUnder(join(dir, e.name))) : [join(dir, e.name)],
  );
}

beforeAll(async () => {
  // Also leaves the graph in Nx's cache, where the ESLint rule reads it.
  const dir = mkdtempSync(join(tmpdir(), 'ironflow-graph-'));
  try {
    await nx(['graph', `--file=${join(dir, 'graph.json')}`]);
    graph = JSON.parse(readFileSync(join(dir, 'graph.json'), 'utf8')).graph;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

describe('the Nx workspace', () => {
  it('every lib and app, the example, the benchmarks and the e2e tests are projects, each with one layer tag', async () => {
    const listed = JSON.parse(await nx(['show', 'projects', '--json'])) as string[];
    const expected = [
      ...readdirSync(join(repoRoot, 'libs')),
      ...readdirSync(join(repoRoot, 'apps')),
      ...readdirSync(join(repoRoot, 'examples')),
      'bench',
      'test-e2e',
    ];
    expect([...listed].sort()).toEqual([...expected].sort());
    for (const [name, node] of Object.entries(graph.nodes)) {
      const layers = (node.data.tags ?? []).filter((t) => t.startsWith('layer:'));
      expect([name, layers.length]).toEqual([name, 1]);
      expect([name, Object.keys(MAY_IMPORT).includes(layers[0].slice('layer:'.length))]).toEqual([name, true]);
    }
    for (const lib of LIBS) expect(graph.nodes[lib].data.tags).toEqual([`layer:${lib}`]);
    for (const app of APPS) expect(graph.nodes[app].data.tags).toEqual(['layer:app']);
  });

  it('every import in the workspace follows the layer rules (eslint @nx/enforce-module-boundaries)', async () => {
    const results = await eslint({ files: ['apps', 'libs', 'examples', 'bench', 'test-e2e'] });
    expect(results.length).toBeGreaterThan(200);
    const problems = results.flatMap((r) => r.messages.filter((m) => m.severity === 2).map((m) => `${r.filePath.slice(repoRoot.length + 1)}:${m.line} ${m.ruleId ?? ''} ${m.message}`));
    expect(problems).toEqual([]);
  }, 120_000);

  describe('a forbidden import fails the check', () => {
    const FORBIDDEN: [string, string, string, RegExp][] = [
      ['the sdk imports the engine', 'libs/sdk/src/boundary-fixture.ts', "import { Engine } from '@ironflow/engine';", /layer:sdk" can only depend on libs tagged with "layer:sdk", "layer:contracts"/],
      ['the rpc transport imports the engine', 'libs/rpc/src/boundary-fixture.ts', "import { Engine } from '@ironflow/engine';", /layer:rpc" can only depend on libs tagged with "layer:rpc", "layer:contracts", "layer:observability"/],
      ['the terminal commit imports the bus', 'libs/outcome/src/boundary-fixture.ts', "import { InProcessBus } from '@ironflow/bus';", /layer:outcome" can only depend on libs tagged with "layer:outcome", "layer:contracts", "layer:fencing", "layer:store"/],
      ['the example imports a service module', 'examples/order-fulfilment/src/boundary-fixture.ts', "import { startServer } from '@ironflow/services';", /layer:example" can only depend on/],
      ['the engine imports a service module', 'libs/engine/src/boundary-fixture.ts', "import { startServer } from '@ironflow/services';", /Circular dependency between "engine" and "services"/],
      ['the store imports the engine', 'libs/store/src/boundary-fixture.ts', "import { Engine } from '@ironflow/engine';", /Circular dependency between "store" and "engine"/],
      ['contracts import observability', 'libs/contracts/src/boundary-fixture.ts', "import { EngineMetrics } from '@ironflow/observability';", /Circular dependency between "contracts" and "observability"/],
      ['production code imports the test kit', 'libs/services/src/boundary-fixture.ts', "import { waitFor } from '@ironflow/testing';", /Circular dependency between "services" and "testing"/],
      ['a lib imports an app by path', 'libs/services/src/boundary-fixture.ts', "import '../../../apps/dispatcher/src/main';", /Projects cannot be imported by a relative or absolute path/],
      ['a test imports an app by path', 'libs/engine/src/boundary-fixture.spec.ts', "import '../../../apps/dispatcher/src/main';", /Projects cannot be imported by a relative or absolute path/],
    ];
    const ALLOWED: [string, string, string][] = [
      ['the engine imports the store', 'libs/engine/src/boundary-fixture.ts', "import { runsSql } from '@ironflow/store';\nexport const x = runsSql;"],
      ['an engine spec imports the test kit', 'libs/engine/src/boundary-fixture.spec.ts', "import { waitFor } from '@ironflow/testing';\nexport const x = waitFor;"],
      ['a CLI spec imports the SDK\'s fake server', 'apps/ironflow/src/boundary-fixture.spec.ts', "import { startFakeServer } from '@ironflow/sdk/testing';\nexport const x = startFakeServer;"],
    ];
    let messages: string[][];
    beforeAll(async () => {
      const results = await eslint({ texts: [...FORBIDDEN, ...ALLOWED].map(([, file, code]) => ({ file, code })) });
      messages = results.map((r) => r.messages.filter((m) => m.ruleId === RULE).map((m) => m.message));
    }, 120_000);

    it.each(FORBIDDEN.map((f, i) => [f[0], i] as const))('%s', (_what, i) => {
      expect(messages[i]).toHaveLength(1);
      expect(messages[i][0]).toMatch(FORBIDDEN[i][3]);
    });

    it.each(ALLOWED.map((a, i) => [a[0], FORBIDDEN.length + i] as const))('while an allowed import passes: %s', (_what, i) => {
      expect(messages[i]).toEqual([]);
    });
  });

  it('the project graph holds the production imports: layers point one way, and the e2e tests depend on every app', () => {
    const deps = (p: string) => new Set(graph.dependencies[p].filter((d) => !d.target.startsWith('npm:')).map((d) => d.target));
    expect([...deps('sdk')]).toEqual(['contracts']);
    expect([...deps('engine')].sort()).toEqual(['bus', 'contracts', 'fencing', 'follow-up', 'observability', 'outcome', 'store']);
    expect(deps('services').has('engine')).toBe(true);
    for (const app of APPS) expect(dependencyClosure(app).has('services')).toBe(true);
    for (const lib of LIBS) expect([lib, dependencyClosure(lib).has(lib)]).toEqual([lib, false]); // no cycle
    for (const lib of LIBS) expect([lib, dependencyClosure(lib).has('testing')]).toEqual([lib, false]);
    expect(graph.nodes['test-e2e'].data.implicitDependencies).toEqual(expect.arrayContaining([...APPS, 'order-fulfilment']));
  });

  it('a lib change affects exactly the projects that depend on it', async () => {
    const affected = async (file: string) => (JSON.parse(await nx(['show', 'projects', '--affected', `--files=${file}`, '--json'])) as string[]).sort();
    expect(await affected('libs/store/src/tx.ts')).toEqual(
      [...APPS, 'bench', 'engine', 'fencing', 'follow-up', 'outcome', 'services', 'store', 'test-e2e', 'testing'].sort(),
    );
    // bench/compare and the chaos run drive Ironflow through the SDK's client and workers.
    expect(await affected('libs/sdk/src/client.ts')).toEqual(['bench', 'ironflow', 'order-fulfilment', 'sdk', 'test-e2e']);
  }, 60_000);

  it('per-project build and test targets: build after the dependencies\' builds, inputs from the project and its dependencies\' production files', () => {
    for (const [name, node] of Object.entries(graph.nodes)) {
      const { build, test } = node.data.targets;
      if (build) {
        expect([name, build.dependsOn]).toEqual([name, ['^build']]);
        expect([name, build.inputs]).toEqual([name, ['production', '^production']]);
        // bench and the browser UI build with their own commands (bench/tsconfig.build.json, npm run build:ui).
        if (name !== 'bench' && name !== 'ui') expect([name, build.options.command]).toEqual([name, `tsc -p ${node.data.root}/tsconfig.build.json && tsc-alias -p ${node.data.root}/tsconfig.build.json`]);
      }
      if (test) expect([name, test.inputs.slice(0, 2)]).toEqual([name, ['default', '^production']]);
    }
    for (const lib of LIBS) expect(graph.nodes[lib].data.targets.build).toBeDefined();
    expect(graph.nodes.testing.data.targets.build).toBeUndefined();
    expect(graph.nodes['test-e2e'].data.targets.test.dependsOn).toEqual(['^build']);
  });

  it('a project whose tests import libs beyond its own dependencies names the test kit among its test inputs', () => {
    const paths = JSON.parse(readFileSync(join(repoRoot, 'tsconfig.base.json'), 'utf8')).compilerOptions.paths as Record<string, string[]>;
    const owner = (file: string) =>
      Object.entries(graph.nodes)
        .filter(([, n]) => file.startsWith(`${n.data.root}/`))
        .sort(([, a], [, b]) => b.data.root.length - a.data.root.length)[0]?.[0];
    let checked = 0;
    for (const [name, node] of Object.entries(graph.nodes)) {
      if (!node.data.targets.test) continue;
      const closure = dependencyClosure(name);
      const beyond = new Set<string>();
      for (const file of filesUnder(node.data.root).filter((f) => f.endsWith('.ts') && TEST_FILE.test(f))) {
        for (const { fileName } of ts.preProcessFile(readFileSync(join(repoRoot, file), 'utf8'), true, true).importedFiles) {
          const target = paths[fileName] ? owner(paths[fileName][0]) : undefined;
          if (target && target !== name && !closure.has(target)) beyond.add(target);
        }
        checked++;
      }
      if (beyond.size) expect([name, [...beyond], node.data.targets.test.inputs]).toEqual([name, [...beyond], expect.arrayContaining(['testKit'])]);
    }
    expect(checked).toBeGreaterThan(50);
  });

  it('the build leaves test doubles and tests out: nothing tsconfig.build.json compiles is a test file or the test kit', () => {
    const config = ts.getParsedCommandLineOfConfigFile(join(repoRoot, 'tsconfig.build.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => { throw new Error(String(d.messageText)); } })!;
    const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
    const compiled = program
      .getSourceFiles()
      .map((sf) => sf.fileName.slice(repoRoot.length + 1))
      .filter((f) => !f.startsWith('node_modules/') && !f.startsWith('..'));
    expect(compiled.length).toBeGreaterThan(150);
    expect(compiled.filter((f) => TEST_FILE.test(f) || f.startsWith('libs/testing/') || f.startsWith('test-e2e/') || f.startsWith('bench/'))).toEqual([]);
    expect(compiled).toEqual(expect.arrayContaining(APPS.map((a) => `apps/${a}/src/main.ts`)));
  }, 120_000);
});
