// What the global set-up (test/global-setup.ts) hands to the test files, through vitest's provide/inject:
// the test files run in forked workers, so a value computed once in the main process reaches them here.
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The PostgreSQL the database suites use: AMBIENT_TEST_POSTGRES_URL, or the throwaway one started for the run. */
    postgresUrl: string;
    /** The reachable Redis (AMBIENT_TEST_REDIS_URL or redis://127.0.0.1:6379), or '' when there is none. */
    redisUrl: string;
  }
}

/** The PostgreSQL server of this test run (only in the suites of the `int` project, which has the global set-up). */
export function postgresTestUrl(): string {
  const url = inject('postgresUrl');
  if (!url) throw new Error('no PostgreSQL for this test: database tests belong in *.int.test.ts files');
  return url;
}

/** The Redis of this test run, or undefined when none is reachable (the Redis suites are then skipped). */
export function redisTestUrl(): string | undefined {
  return inject('redisUrl') || undefined;
}
