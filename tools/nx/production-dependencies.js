// @ts-check
/**
 * An Nx plugin (registered in nx.json) that makes the project graph the graph of production
 * imports: a project depends on what its non-test files import. Nx's own source analysis is off
 * (`pluginsConfig["@nx/js"].analyzeSourceFiles: false`) because it also counts specs, and our
 * specs import the test kit (`@ironflow/testing`), which imports the engine and the services it
 * assembles: counted, every tested lib would depend on itself (engine → testing → engine), and
 * `build`'s `^build` would be a cycle. Tests that use the test kit name it in their target's
 * inputs instead (nx.json namedInput `testKit`).
 *
 * Test files: `*.spec.ts`, `*.test.ts`, anything under `__tests__/` or a lib's `src/testing/`
 * (the same set eslint.config.js lets import any lib). The test kit's own files are its
 * production. Imports are read with TypeScript's pre-processor (no type check); `@ironflow/*`
 * aliases resolve through tsconfig.base.json's paths, relative imports by path, bare ones to the
 * npm node of their package.
 */
const { readFileSync } = require('node:fs');
const { join, posix } = require('node:path');
const ts = require('typescript');

const { TEST_FILE } = require('./layers');

/** @param {string} workspaceRoot */
function aliasTargets(workspaceRoot) {
  const base = JSON.parse(readFileSync(join(workspaceRoot, 'tsconfig.base.json'), 'utf8'));
  /** @type {Map<string, string>} */
  const targets = new Map();
  for (const [alias, [file]] of Object.entries(base.compilerOptions.paths ?? {})) targets.set(alias, file);
  return targets;
}

/**
 * @param {Record<string, { root: string }>} projects
 * @returns {(file: string) => string | undefined} the project whose root holds `file` (the deepest)
 */
function projectOfFile(projects) {
  const roots = Object.entries(projects)
    .map(([name, p]) => ({ name, root: p.root === '.' ? '' : `${p.root}/` }))
    .sort((a, b) => b.root.length - a.root.length);
  return (file) => roots.find((r) => file.startsWith(r.root))?.name;
}

/** @param {string} specifier */
function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** @type {import('nx/src/project-graph/plugins').CreateDependencies} */
const createDependencies = (_options, context) => {
  const aliases = aliasTargets(context.workspaceRoot);
  const ownerOf = projectOfFile(context.projects);
  /** @type {import('nx/src/project-graph/plugins').RawProjectGraphDependency[]} */
  const dependencies = [];
  const seen = new Set();
  for (const [source, files] of Object.entries(context.fileMap.projectFileMap)) {
    for (const { file } of files) {
      if (!file.endsWith('.ts') || file.endsWith('.d.ts') || TEST_FILE.test(file)) continue;
      const text = readFileSync(join(context.workspaceRoot, file), 'utf8');
      for (const { fileName: specifier } of ts.preProcessFile(text, true, true).importedFiles) {
        let target;
        if (aliases.has(specifier)) {
          target = ownerOf(/** @type {string} */ (aliases.get(specifier)));
        } else if (specifier.startsWith('.')) {
          target = ownerOf(posix.normalize(posix.join(posix.dirname(file), specifier)));
        } else if (!specifier.startsWith('node:')) {
          const npm = `npm:${packageName(specifier)}`;
          if (context.externalNodes[npm]) target = npm;
        }
        if (!target || target === source) continue;
        const key = `${source} ${target} ${file}`;
        if (seen.has(key)) continue;
        seen.add(key);
        dependencies.push({ source, target, type: 'static', sourceFile: file });
      }
    }
  }
  return dependencies;
};

module.exports = { name: 'ironflow-production-dependencies', createDependencies };
