import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqliteTestDatabase } from '../../test-support/databases.js';
import type { TestDatabase } from '../../test-support/databases.js';
import { SqliteDatabase } from './sqlite-database.js';

describe('SqliteDatabase group commit', () => {
  let testDb: TestDatabase;
  let db: SqliteDatabase;
  beforeAll(async () => {
    testDb = sqliteTestDatabase();
    db = new SqliteDatabase(testDb.url);
    await db.executeScript('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)');
  });
  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  it('commits concurrent transactions together, rolling back only the one that fails', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        db.transaction(async (tx) => {
          await tx.execute('INSERT INTO t (v) VALUES (?)', [`row-${i}`]);
          if (i === 7) {
            await tx.execute('INSERT INTO t (v) VALUES (?)', ['row-7-extra']);
            throw new Error('fail 7');
          }
          return i;
        }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(19);
    expect(results[7]).toMatchObject({ status: 'rejected', reason: new Error('fail 7') });
    const rows = await db.query<{ v: string }>('SELECT v FROM t ORDER BY id');
    expect(rows.map((r) => r.v)).toHaveLength(19);
    expect(rows.map((r) => r.v)).not.toContain('row-7');
    expect(rows.map((r) => r.v)).not.toContain('row-7-extra');
  });

  it('reports a unique violation to its own transaction only', async () => {
    const [first, duplicate] = await Promise.allSettled([
      db.transaction((tx) => tx.execute('INSERT INTO t (v) VALUES (?)', ['dup'])),
      db.transaction((tx) => tx.execute('INSERT INTO t (v) VALUES (?)', ['dup'])),
    ]);
    expect(first.status).toBe('fulfilled');
    expect(duplicate).toMatchObject({ status: 'rejected' });
    expect((duplicate as PromiseRejectedResult).reason.constructor.name).toBe('UniqueViolationError');
  });
});
