/**
 * ESLint (flat config) for one rule: Nx's `@nx/enforce-module-boundaries`, which reads each
 * project's `layer:*` tag (its project.json) and enforces DESIGN.md's import rules as
 * tools/nx/layers.js writes them down; it also refuses cycles between projects and relative
 * imports across a project boundary. Test files may import any lib through its `@ironflow/*`
 * alias, never an app. `npm test` runs it (test-e2e/workspace/module-boundaries.spec.ts), as does
 * `npm run lint`. The @typescript-eslint plugin is loaded only so that the source's
 * `eslint-disable` comments name known rules; none of its rules is on.
 */
const nx = require('@nx/eslint-plugin');
const tsParser = require('@typescript-eslint/parser');
const tsPlugin = require('@typescript-eslint/eslint-plugin');
const { MAY_IMPORT, NOT_IMPORTABLE, TEST_FILE_GLOBS } = require('./tools/nx/layers');

const layer = (name) => `layer:${name}`;

module.exports = [
  { ignores: ['dist/**', 'node_modules/**', '.nx/**', 'coverage/**', 'bench/results/**', 'libs/contracts/src/gen/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tsParser },
    plugins: { '@nx': nx, '@typescript-eslint': tsPlugin },
    linterOptions: { reportUnusedDisableDirectives: 'off' },
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: [],
          depConstraints: Object.entries(MAY_IMPORT).map(([name, allowed]) => ({
            sourceTag: layer(name),
            onlyDependOnLibsWithTags: [layer(name), ...allowed.map(layer)],
          })),
        },
      ],
    },
  },
  {
    files: TEST_FILE_GLOBS,
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: ['@ironflow/*'],
          depConstraints: [{ sourceTag: '*', notDependOnLibsWithTags: NOT_IMPORTABLE.map(layer) }],
        },
      ],
    },
  },
];
