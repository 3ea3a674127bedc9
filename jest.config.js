/**
 * One Jest config for unit, contract and e2e tests. TypeScript is compiled by SWC
 * (decorator metadata on) and `@ironflow/*` imports resolve to `libs/<name>/src`. ESM-only
 * dependencies (`@marcbachmann/cel-js`, `p-retry` and its `is-network-error`; Node itself loads
 * them with `require`) are compiled to CommonJS by SWC too, since Jest's module loader cannot
 * `require` ES modules.
 */
const swc = ['@swc/jest', {
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    target: 'es2022',
  },
  module: { type: 'commonjs' },
}];
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': swc, '/node_modules/(@marcbachmann/cel-js|p-retry|is-network-error)/.+\\.js$': swc },
  transformIgnorePatterns: ['/node_modules/(?!(@marcbachmann/cel-js|p-retry|is-network-error)/)'],
  moduleNameMapper: {
    '^@ironflow/contracts/proto$': '<rootDir>/libs/contracts/src/proto.ts',
    '^@ironflow/sdk/testing$': '<rootDir>/libs/sdk/src/testing/fake-server.ts',
    '^@ironflow/(.*)$': '<rootDir>/libs/$1/src/index.ts',
  },
  testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts', '<rootDir>/test-e2e/**/*.spec.ts'],
  globalSetup: '<rootDir>/libs/testing/src/global-setup.ts',
  testTimeout: 60000,
  maxWorkers: 2,
};
