import { defineConfig } from 'vitest/config';

// Two projects, so that `npm run test:unit` runs without any database server:
// - unit: tests that need no database or server (plain `*.test.ts`);
// - int: tests that need a real database or a running server (`*.int.test.ts`), with the global set-up
//   that provides a PostgreSQL (AMBIENT_TEST_POSTGRES_URL or a throwaway embedded one) and probes for
//   Redis (test/global-setup.ts).
const DATABASE_TESTS = ['src/**/*.int.test.ts', 'test/**/*.int.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['src/**/*.test.ts', 'test/**/*.test.ts'], exclude: DATABASE_TESTS },
      },
      {
        extends: true,
        test: { name: 'int', include: DATABASE_TESTS, globalSetup: ['test/global-setup.ts'] },
      },
    ],
  },
});
