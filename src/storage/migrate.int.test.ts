// Migrations (migrate.ts): several processes starting on one fresh database at once apply each version
// exactly once, serialised by the dialect's transaction lock (PostgreSQL) or BEGIN IMMEDIATE (SQLite).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { migrate } from './migrate.js';
import { MIGRATIONS } from './migrations/index.js';
import { openDatabase } from './open-database.js';
import type { SqlDatabase } from './sql/database.js';

describe.each(BACKENDS)('migrate on %s', (backend) => {
  let testDb: TestDatabase;
  const dbs: SqlDatabase[] = [];

  beforeAll(async () => {
    testDb = await testDatabase(backend);
    // Three "processes": each its own connections to the one database.
    for (let i = 0; i < 3; i++) dbs.push(openDatabase(testDb.url));
  });

  afterAll(async () => {
    for (const db of dbs) await db.close();
    await testDb.dispose();
  });

  it('applies every version exactly once when three processes start at once, then nothing', async () => {
    const applied = await Promise.all(dbs.map((db) => migrate(db)));
    const versions = MIGRATIONS.map((m) => m.version).sort((a, b) => a - b);
    expect(applied.flat().sort((a, b) => a - b)).toEqual(versions);
    const rows = await dbs[0].query<{ version: number }>('SELECT version FROM schema_migration ORDER BY version');
    expect(rows.map((r) => Number(r.version))).toEqual(versions);
    expect(await migrate(dbs[1])).toEqual([]);
  });
});
