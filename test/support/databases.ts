// Test databases: every test file gets its own, so tests never see each other's rows or a stale schema.
// SQLite: a file in a fresh temporary folder. PostgreSQL: a fresh schema, dropped afterwards, in the test
// run's server (AMBIENT_TEST_POSTGRES_URL, or the throwaway one of test/global-setup.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { FULL } from './full-tests.js';
import { postgresTestUrl } from './provided.js';

export interface TestDatabase {
  readonly name: 'sqlite' | 'postgres';
  readonly url: string;
  dispose(): Promise<void>;
}

export function sqliteTestDatabase(): TestDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'ambient-fhir-test-'));
  return {
    name: 'sqlite',
    url: `sqlite:${join(dir, 'test.db')}`,
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

export async function postgresTestDatabase(): Promise<TestDatabase> {
  const serverUrl = postgresTestUrl();
  const schema = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    name: 'postgres',
    url: url.toString(),
    dispose: async () => {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    },
  };
}

/**
 * Both backends, for `describe.each`: the contract suites run against each. In the `processes` project
 * (two server processes, test-app.ts) only PostgreSQL: SQLite allows one writing process.
 */
export const BACKENDS: readonly ('sqlite' | 'postgres')[] = process.env.AMBIENT_TEST_PROCESSES
  ? ['postgres']
  : ['sqlite', 'postgres'];

/** For a suite long on each database: only `quick` in `npm test`, BACKENDS in `npm run test:full`. */
export function backendsQuickOn(quick: 'sqlite' | 'postgres'): readonly ('sqlite' | 'postgres')[] {
  return FULL ? BACKENDS : [quick];
}

export function testDatabase(name: 'sqlite' | 'postgres'): Promise<TestDatabase> {
  return name === 'sqlite' ? Promise.resolve(sqliteTestDatabase()) : postgresTestDatabase();
}
