/**
 * Two projects: fast unit specs (test/unit, mirroring src/) and end-to-end specs
 * (test/e2e). `npm test` runs both. swc transforms TypeScript; `npm run typecheck` runs tsc.
 * swc needs decorator metadata and kept class names, or Nest silently injects `undefined`.
 */
const swc = [
  '@swc/jest',
  {
    jsc: {
      target: 'es2022',
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      keepClassNames: true,
    },
    module: { type: 'commonjs' },
  },
];
const common = {
  transform: { '^.+\\.ts$': swc },
  moduleFileExtensions: ['ts', 'js', 'json'],
  testEnvironment: 'node',
};
module.exports = {
  projects: [
    {
      ...common,
      displayName: 'unit',
      roots: ['<rootDir>/test'],
      testMatch: ['<rootDir>/test/unit/**/*.spec.ts', '<rootDir>/test/*.spec.ts'],
    },
    {
      ...common,
      displayName: 'e2e',
      roots: ['<rootDir>/test'],
      testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts', '<rootDir>/test/contracts/**/*.spec.ts'],
    },
  ],
};
