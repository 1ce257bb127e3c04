/** Unit and integration tests of every package and service, plus the end-to-end suite.
 * Workspace packages resolve to their TypeScript sources so tests never run stale builds. */
const swc = ['@swc/jest', { jsc: { target: 'es2023', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } }];
const common = {
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper: { '^@fleet/([a-z-]+)$': '<rootDir>/packages/$1/src' },
  testEnvironment: 'node',
};
module.exports = {
  testTimeout: 20000,
  // The machine's PostgreSQL, Redis, NATS and Mosquitto, or with FLEET_TEST_CONTAINERS=1 and a
  // Docker engine the same in containers (packages/test-kit/containers.js).
  globalSetup: '<rootDir>/packages/test-kit/jest-setup.js',
  globalTeardown: '<rootDir>/packages/test-kit/jest-teardown.js',
  projects: [
    { ...common, displayName: 'unit+integration', testMatch: ['<rootDir>/packages/*/test/**/*.test.ts', '<rootDir>/services/*/test/**/*.test.ts'] },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/tests-e2e/**/*.test.ts'],
      globalSetup: '<rootDir>/tests-e2e/support/global-setup.ts',
      globalTeardown: '<rootDir>/tests-e2e/support/global-teardown.ts',
    },
  ],
};
