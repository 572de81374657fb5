// Search statements on the event loop, on a leash (inline-searches.ts): a short one never reaches the read
// workers; one that overruns the leash is answered by a worker within its budget, and its shape goes to
// the workers directly for a while; one whose budget ends inside the leash is refused at the budget.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sqliteTestDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { BudgetExceededError } from '../sql/database.js';
import type { ReadBudget } from '../sql/database.js';
import { SlowStatements } from './inline-searches.js';
import { SqliteDatabase } from './sqlite-database.js';

/** Counts to `n`: about a second per 10 million here, far past the leash at 2 million. */
const COUNT = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c';
const budget = (ms: number): ReadBudget => ({ deadline: performance.now() + ms, limitMs: ms });

describe('search statements on a leash', () => {
  let testDb: TestDatabase;
  let db: SqliteDatabase;
  beforeAll(async () => {
    testDb = sqliteTestDatabase();
    db = new SqliteDatabase(testDb.url);
    await db.executeScript('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
    await db.execute("INSERT INTO t (v) VALUES ('a'), ('b'), ('c')");
    await db.warmUp();
  });
  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  it('answers a short statement on the event loop, without a read worker', async () => {
    const pool = vi.spyOn(db.readPool!, 'query');
    try {
      const rows = await db.boundedQuery<{ v: string }>(
        'SELECT v FROM t WHERE id >= ? ORDER BY id',
        [2],
        budget(10_000),
      );
      expect(rows.map((r) => r.v)).toEqual(['b', 'c']);
      expect(pool).not.toHaveBeenCalled();
    } finally {
      pool.mockRestore();
    }
  });

  it('moves a statement that overruns the leash to a read worker, and its shape after it', async () => {
    const pool = vi.spyOn(db.readPool!, 'query');
    try {
      const long = db.boundedQuery<{ n: number }>(COUNT, [2_000_000], budget(60_000));
      await new Promise((resolve) => setImmediate(resolve));
      expect(pool).toHaveBeenCalledTimes(1);
      // Marked slow: the next one of that text goes to a worker at once, even when short.
      expect(await db.boundedQuery<{ n: number }>(COUNT, [10], budget(60_000))).toEqual([{ n: 10 }]);
      expect(await long).toEqual([{ n: 2_000_000 }]);
      expect(pool).toHaveBeenCalledTimes(2);
    } finally {
      pool.mockRestore();
    }
  });

  it('refuses a statement whose budget ends within the leash at the budget, not on a worker', async () => {
    const pool = vi.spyOn(db.readPool!, 'query');
    try {
      const other = COUNT.replace('count(*) AS n', 'count(*) AS m');
      await expect(db.boundedQuery(other, [1_000_000_000], budget(2))).rejects.toBeInstanceOf(BudgetExceededError);
      expect(pool).not.toHaveBeenCalled();
    } finally {
      pool.mockRestore();
    }
  });
});

describe('SlowStatements', () => {
  it('sends a text to the workers for 0.1 s per overrun, doubled per overrun in a row, up to a minute', () => {
    let now = 0;
    const slow = new SlowStatements(() => now);
    slow.overran('SELECT 1');
    expect(slow.isSlow('SELECT 1')).toBe(true);
    expect(slow.isSlow('SELECT 2')).toBe(false);
    now = 101;
    expect(slow.isSlow('SELECT 1')).toBe(false);
    slow.overran('SELECT 1');
    now += 150;
    expect(slow.isSlow('SELECT 1')).toBe(true);
    now += 60;
    expect(slow.isSlow('SELECT 1')).toBe(false);
    for (let i = 0; i < 20; i++) slow.overran('SELECT 1');
    now += 59_000;
    expect(slow.isSlow('SELECT 1')).toBe(true);
    now += 1_001;
    expect(slow.isSlow('SELECT 1')).toBe(false);
  });

  it('forgets the overruns of a text that ran within the leash', () => {
    let now = 0;
    const slow = new SlowStatements(() => now);
    for (let i = 0; i < 5; i++) slow.overran('SELECT 1');
    now = 17_000;
    slow.ranInline('SELECT 1');
    slow.overran('SELECT 1');
    now += 101;
    expect(slow.isSlow('SELECT 1')).toBe(false);
  });
});
