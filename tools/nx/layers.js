// @ts-check
/**
 * DESIGN.md's import rules as data, read by eslint.config.js (`@nx/enforce-module-boundaries`)
 * and by the workspace tests. Every project carries one tag `layer:<name>` (its project.json);
 * a layer may import itself and the layers listed for it:
 *
 *   apps → service modules → engine → (outcome, follow-up, fencing) → (store, bus) → contracts;
 *   no lib imports an app; sdk imports only contracts.
 *
 * DESIGN's lib table adds the rest: fencing, outcome and follow-up import only what its table
 * lists for them; observability (metrics, logger) sits on contracts and serves the engine, the
 * transport and the service modules; rpc (the Connect/gRPC transport) sits on contracts; apps may
 * reach any lib below the service modules (the CLI's dev command reads the engine's option list
 * and the bus's run events), never the other way; the test kit, the benchmarks and the e2e tests
 * may use any lib, and no production code uses the test kit.
 */
const LIBS = ['contracts', 'store', 'bus', 'observability', 'fencing', 'outcome', 'follow-up', 'engine', 'rpc', 'services', 'sdk'];

/** @type {Record<string, string[]>} */
const MAY_IMPORT = {
  contracts: [],
  store: ['contracts'],
  bus: ['contracts'],
  observability: ['contracts'],
  fencing: ['contracts', 'store'],
  outcome: ['contracts', 'fencing', 'store'],
  'follow-up': ['contracts', 'store', 'bus'],
  engine: ['contracts', 'store', 'bus', 'fencing', 'outcome', 'follow-up', 'observability'],
  rpc: ['contracts', 'observability'],
  services: ['contracts', 'store', 'bus', 'fencing', 'outcome', 'follow-up', 'engine', 'observability', 'rpc'],
  sdk: ['contracts'],
  // Apps sit on top: any lib below them (the CLI's `ironflow dev` reads the engine's option list
  // for its help and follows run events on the bus; its client commands use the SDK), never the
  // test kit; nothing imports an app.
  app: LIBS,
  example: ['contracts', 'sdk'],
  // Browser code (the runs UI): it talks to the API over HTTP and imports none of our libs.
  ui: [],
  testing: LIBS,
  bench: [...LIBS, 'testing'],
  e2e: [...LIBS, 'testing'],
};

/** Layers nothing may import (they run as processes or programs). */
const NOT_IMPORTABLE = ['app', 'example', 'bench', 'e2e', 'ui'];

/**
 * Test files: specs, `__tests__/`, a lib's `src/testing/` (its test doubles, out of the build).
 * They may import any lib (the test kit imports the libs it assembles), never a process.
 */
const TEST_FILE_GLOBS = ['**/*.spec.ts', '**/*.test.ts', '**/__tests__/**/*.ts', 'libs/*/src/testing/**/*.ts'];
const TEST_FILE = /(\.spec\.ts|\.test\.ts)$|\/__tests__\/|^libs\/[^/]+\/src\/testing\//;

module.exports = { LIBS, MAY_IMPORT, NOT_IMPORTABLE, TEST_FILE_GLOBS, TEST_FILE };
