// Bounded reads (SqlDatabase.boundedQuery), the storage side of the search time budget: a statement
// past its deadline or aborted is stopped in the database, not only abandoned, on both backends.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresTestUrl } from '../../test/support/provided.js';
import { PostgresDatabase } from './postgres/postgres-database.js';
import { BudgetExceededError } from './sql/database.js';
import type { ReadBudget } from './sql/database.js';
import { SqliteReadPool } from './sqlite/read-pool.js';

const budget = (ms: number, signal?: AbortSignal): ReadBudget => ({
  deadline: performance.now() + ms,
  limitMs: ms,
  signal,
});

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return condition();
}

/** Seconds of work for SQLite: a nested loop over 200,000 × 200,000 rows with no usable index. */
const SLOW_SQLITE = 'SELECT COUNT(*) AS n FROM x a, x b WHERE a.v % 7 = b.v % 5';

describe('the SQLite read pool', () => {
  let dir: string;
  let file: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ambient-read-pool-'));
    file = join(dir, 'pool.db');
    const db = new BetterSqlite3(file);
    db.pragma('journal_mode = WAL');
    db.exec(
      'CREATE TABLE x (v INTEGER); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200000) INSERT INTO x SELECT i FROM c; CREATE TABLE y AS SELECT v FROM x WHERE v <= 5000',
    );
    db.close();
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('answers reads from worker threads', async () => {
    const pool = new SqliteReadPool(file, 2);
    try {
      const rows = await pool.query<{ n: number }>('SELECT COUNT(*) AS n FROM x WHERE v <= ?', [10], budget(5000));
      expect(rows).toEqual([{ n: 10 }]);
    } finally {
      await pool.close();
    }
  });

  it('interrupts a statement at its deadline and keeps the worker', async () => {
    const pool = new SqliteReadPool(file, 1);
    try {
      await pool.start();
      expect(pool.stats().interrupts).toBe(true);
      const error = await pool.query(SLOW_SQLITE, [], budget(100)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BudgetExceededError);
      expect((error as BudgetExceededError).reason).toBe('deadline');
      // The statement stopped: the one worker is idle again (not replaced) and answers the next read.
      expect(await until(() => pool.stats().busy === 0)).toBe(true);
      expect(pool.stats()).toMatchObject({ workers: 1, stopping: 0 });
      expect(await pool.query('SELECT 1 AS one', [], budget(5000))).toEqual([{ one: 1 }]);
    } finally {
      await pool.close();
    }
  });

  it('stops a statement whose client went away', async () => {
    const pool = new SqliteReadPool(file, 1);
    try {
      const controller = new AbortController();
      const pending = pool.query(SLOW_SQLITE, [], budget(60_000, controller.signal)).catch((e: unknown) => e);
      setTimeout(() => controller.abort(), 100);
      const error = await pending;
      expect(error).toBeInstanceOf(BudgetExceededError);
      expect((error as BudgetExceededError).reason).toBe('aborted');
      expect(await until(() => pool.stats().busy === 0)).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it('without the interrupt extension, answers at the deadline and lets the statement finish', async () => {
    const pool = new SqliteReadPool(file, 1, { extension: false });
    try {
      await pool.start();
      expect(pool.stats().interrupts).toBe(false);
      // A second or so of work (5,000 × 5,000 rows): too much for the budget, little for the test.
      const error = await pool
        .query('SELECT COUNT(*) AS n FROM y a, y b WHERE a.v % 7 = b.v % 5', [], budget(50))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BudgetExceededError);
      expect(pool.stats()).toMatchObject({ workers: 1, stopping: 1 });
      // The worker is not ended (that would abort the process) and serves the next read once done.
      expect(await pool.query('SELECT 2 AS two', [], budget(60_000))).toEqual([{ two: 2 }]);
      expect(pool.stats()).toMatchObject({ workers: 1, stopping: 0 });
    } finally {
      await pool.close();
    }
  });

  it('answers with the error when a worker cannot open the database, without starting one after another', async () => {
    const pool = new SqliteReadPool(join(dir, 'missing.db'), 2);
    try {
      const error = await pool.query('SELECT 1', [], budget(5000)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(BudgetExceededError);
      expect(String(error)).toMatch(/unable to open|does not exist|SQLITE_CANTOPEN/i);
      expect(pool.stats()).toMatchObject({ workers: 0, queued: 0 });
    } finally {
      await pool.close();
    }
  });

  it('times out a read that waits for a busy worker', async () => {
    const pool = new SqliteReadPool(file, 1);
    try {
      await pool.start();
      const slow = pool.query(SLOW_SQLITE, [], budget(1000)).catch((e: unknown) => e);
      const queued = await pool.query('SELECT 1', [], budget(50)).catch((e: unknown) => e);
      expect(queued).toBeInstanceOf(BudgetExceededError);
      expect(pool.stats().queued).toBe(0);
      expect(await slow).toBeInstanceOf(BudgetExceededError);
    } finally {
      await pool.close();
    }
  });
});

describe('PostgreSQL bounded reads', () => {
  let db: PostgresDatabase;
  let admin: pg.Client;

  beforeAll(async () => {
    db = new PostgresDatabase(postgresTestUrl());
    admin = new pg.Client({ connectionString: postgresTestUrl() });
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.end();
    await db?.close();
  });

  /** Is a statement with this exact text still running anywhere on the server? */
  const running = async (marker: string) =>
    Number(
      (
        await admin.query(
          `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1 AND pid <> pg_backend_pid()`,
          [`%${marker}%`],
        )
      ).rows[0].n,
    ) > 0;

  it('cancels a statement at its deadline, in the server', async () => {
    const seconds = 30 + Math.random();
    const sql = `SELECT pg_sleep(${seconds.toFixed(6)})`;
    const started = performance.now();
    const error = await db.boundedQuery(sql, [], budget(200)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BudgetExceededError);
    expect((error as BudgetExceededError).reason).toBe('deadline');
    expect(performance.now() - started).toBeLessThan(seconds * 1000);
    expect(await until(async () => !(await running(seconds.toFixed(6))))).toBe(true);
  });

  it('cancels a statement whose client went away', async () => {
    const seconds = 30 + Math.random();
    const controller = new AbortController();
    const pending = db.boundedQuery(`SELECT pg_sleep(${seconds.toFixed(6)})`, [], budget(60_000, controller.signal));
    expect(await until(() => running(seconds.toFixed(6)))).toBe(true);
    controller.abort();
    const error = await pending.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BudgetExceededError);
    expect((error as BudgetExceededError).reason).toBe('aborted');
    expect(await until(async () => !(await running(seconds.toFixed(6))))).toBe(true);
  });

  it('sets the server-side statement_timeout on search connections', async () => {
    const [row] = await db.boundedQuery<{ statement_timeout: string }>('SHOW statement_timeout', [], budget(1500));
    // The pool was made by the first search (200 ms budget): its connections carry that timeout.
    expect(row.statement_timeout).toBe('200ms');
    // Ordinary statements (writes, migrations) have none.
    const [plain] = await db.query<{ statement_timeout: string }>('SHOW statement_timeout');
    expect(plain.statement_timeout).toBe('0');
  });
});
