import { defineConfig } from 'vitest/config';

// Two projects, so that `npm run test:unit` runs without any database server:
// - unit: tests that need no database or server (plain `*.test.ts`);
// - int: tests that need a real database or a running server (`*.int.test.ts`), with the global set-up
//   that provides a PostgreSQL (AMBIENT_TEST_POSTGRES_URL or a throwaway embedded one) and probes for
//   Redis (test/global-setup.ts).
const DATABASE_TESTS = ['src/**/*.int.test.ts', 'test/**/*.int.test.ts'];
// The end-to-end suites that run a second time as the `processes` project: against two server processes
// on one PostgreSQL database, every request going to the other process (test/support/process-pair.ts).
const PROCESS_PAIR_SUITES = [
  'test/fhir-rest.int.test.ts',
  'test/fhir-kit-client.int.test.ts',
  'test/fhir-bundles.int.test.ts',
  'test/fhir-conditional.int.test.ts',
  'test/fhir-conformance.int.test.ts',
  'test/fhir-scopes.int.test.ts',
  'test/fhir-patch-validate.int.test.ts',
  'test/fhir-options.int.test.ts',
  'test/fhir-bad-input.int.test.ts',
  'test/referential-integrity.int.test.ts',
  'test/scribe.int.test.ts',
  'test/scribe-retry.int.test.ts',
  'src/search/search-http.int.test.ts',
  'test/fhir-binary.int.test.ts',
  'test/fhir-compartments.int.test.ts',
  'test/fhir-xml.int.test.ts',
  'test/profiles.int.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Most test files wait on a database or a server process: three at a time keep 2 cores busy
    // (measured: the suite in 7 minutes instead of 10½ with vitest's default of one on 2 cores).
    maxWorkers: 3,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'console/src/**/*.test.ts'],
          exclude: DATABASE_TESTS,
        },
      },
      {
        extends: true,
        test: { name: 'int', include: DATABASE_TESTS, globalSetup: ['test/global-setup.ts'] },
      },
      // Only with the long suites (npm run test:full, which CI runs): every file starts two server processes.
      ...(process.env.AMBIENT_FULL_TESTS
        ? [
            {
              extends: true as const,
              test: {
                name: 'processes',
                include: PROCESS_PAIR_SUITES,
                globalSetup: ['test/global-setup.ts'],
                env: { AMBIENT_TEST_PROCESSES: '2' },
              },
            },
          ]
        : []),
    ],
  },
});
