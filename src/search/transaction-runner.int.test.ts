// Search statements inside an open transaction (transaction-runner.ts), on both databases: they see
// the transaction's writes, and the budget stops them (PostgreSQL: a local statement_timeout; SQLite:
// the writer's watchdog, and WRITER_HOLD_MS at most).
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { openDatabase } from '../storage/open-database.js';
import { BudgetExceededError } from '../storage/sql/database.js';
import type { ReadBudget, SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import { SqliteDatabase } from '../storage/sqlite/sqlite-database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { logStatements } from '../../test/support/statement-log.js';
import { Sql } from './sql/fragment.js';
import { runInTransaction, withTransactionRunner, WRITER_HOLD_MS } from './transaction-runner.js';

const budget = (ms: number, signal?: AbortSignal): ReadBudget => ({
  deadline: performance.now() + ms,
  limitMs: ms,
  signal,
});

/** Counts to `n` in SQL: the same costly statement on both databases. */
const counting = (n: number) =>
  new Sql('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c', [
    n,
  ]);

describe.each(BACKENDS)('the transaction runner on %s', (backend) => {
  let testDb: TestDatabase;
  let db: SqlDatabase;

  beforeAll(async () => {
    testDb = await testDatabase(backend);
    db = openDatabase(testDb.url);
    await db.execute('CREATE TABLE runner_probe (v INTEGER NOT NULL)');
  });

  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  it("sees the transaction's own uncommitted writes", async () => {
    const seen = await db.transaction(async (tx) => {
      await tx.execute('INSERT INTO runner_probe (v) VALUES (?)', [41]);
      const one = await runInTransaction(tx, budget(5_000), new Sql('SELECT v FROM runner_probe WHERE v = ?', [41]));
      const many = await withTransactionRunner(tx, budget(5_000), async (run) => [
        ...(await run(new Sql('SELECT v FROM runner_probe WHERE v = ?', [41]))),
        ...(await run(new Sql('SELECT v + 1 AS v FROM runner_probe WHERE v = ?', [41]))),
      ]);
      return [...one, ...many];
    });
    expect(seen.map((r) => Number(r.v))).toEqual([41, 41, 42]);
  });

  it('refuses to start a statement past the deadline or after the client went away', async () => {
    const aborted = new AbortController();
    aborted.abort();
    await db.transaction(async (tx) => {
      const statement = new Sql('SELECT 1 AS one', []);
      await expect(runInTransaction(tx, budget(-1), statement)).rejects.toMatchObject({ reason: 'deadline' });
      await expect(
        withTransactionRunner(tx, budget(5_000, aborted.signal), (run) => run(statement)),
      ).rejects.toBeInstanceOf(BudgetExceededError);
    });
  });

  it('stops a costly statement at the budget, and the transaction fails whole', async () => {
    const started = performance.now();
    await expect(
      db.transaction(async (tx) => {
        await tx.execute('INSERT INTO runner_probe (v) VALUES (?)', [77]);
        return runInTransaction(tx, budget(200), counting(1_000_000_000));
      }),
    ).rejects.toMatchObject({ reason: 'deadline', limitMs: 200 });
    // Generous: the statement alone would run for minutes.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await db.query('SELECT v FROM runner_probe WHERE v = ?', [77])).toEqual([]);
    // The writer goes on.
    const rows = await db.transaction((tx) => runInTransaction(tx, budget(5_000), counting(10)));
    expect(Number(rows[0].n)).toBe(10);
  });
});

describe("the transaction runner on SQLite's writer", () => {
  let testDb: TestDatabase;

  beforeAll(async () => {
    testDb = await testDatabase('sqlite');
  });

  afterAll(async () => {
    await testDb.dispose();
  });

  it(`stops a statement at ${WRITER_HOLD_MS} ms when the budget leaves more: it holds the event loop`, async () => {
    const db = new SqliteDatabase(testDb.url, { readWorkers: 0 });
    try {
      const started = performance.now();
      await expect(
        db.transaction((tx) => withTransactionRunner(tx, budget(60_000), (run) => run(counting(1_000_000_000)))),
      ).rejects.toMatchObject({ reason: 'held', limitMs: WRITER_HOLD_MS });
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      await db.close();
    }
  });

  it('without the interrupt extension, runs no search inside the write transaction', async () => {
    const db = new SqliteDatabase(testDb.url, { readWorkers: 0, extension: false });
    try {
      expect(db.watchdog).toBeUndefined();
      const refused = db.transaction((tx) => runInTransaction(tx, budget(60_000), counting(10)));
      await expect(refused).rejects.toBeInstanceOf(AppError);
      await expect(refused).rejects.toMatchObject({ code: 'search-not-bounded' });
    } finally {
      await db.close();
    }
  });
});

describe('the transaction runner on postgres: the local statement_timeout', () => {
  let testDb: TestDatabase;
  let db: SqlDatabase;

  beforeAll(async () => {
    testDb = await testDatabase('postgres');
    db = openDatabase(testDb.url);
  });

  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  /** `tx` with the texts of the statements sent through it. */
  function recording(tx: SqlExecutor): { tx: SqlExecutor; sent: string[] } {
    const sent: string[] = [];
    return { sent, tx: logStatements(tx, sent) };
  }

  const timeoutNow = async (tx: SqlExecutor) =>
    (await tx.query<{ statement_timeout: string }>('SHOW statement_timeout'))[0].statement_timeout;

  it('sets the bound once for a search of several statements and sets the previous one back after', async () => {
    const result = await db.transaction(async (tx) => {
      await tx.query(`SELECT set_config('statement_timeout', '45s', true)`);
      const { tx: watched, sent } = recording(tx);
      const rows = await withTransactionRunner(watched, budget(5_000), async (run) => [
        ...(await run(new Sql('SELECT 1 AS n', []))),
        ...(await run(new Sql('SELECT 2 AS n', []))),
        ...(await run(new Sql('SELECT 3 AS n', []))),
      ]);
      return { rows, sent, after: await timeoutNow(tx) };
    });
    expect(result.rows.map((r) => r.n)).toEqual([1, 2, 3]);
    // One set, three statements, one restore (each was two statements more before).
    expect(result.sent).toHaveLength(5);
    expect(result.after).toBe('45s');
  });

  it('restores the bound inside the statement of a one-statement search, rows in order, none too', async () => {
    const result = await db.transaction(async (tx) => {
      await tx.query(`SELECT set_config('statement_timeout', '45s', true)`);
      const { tx: watched, sent } = recording(tx);
      const ordered = await runInTransaction(
        watched,
        budget(5_000),
        new Sql('SELECT g FROM generate_series(1, ?) AS g ORDER BY g DESC LIMIT 3', [5]),
      );
      const afterRows = await timeoutNow(tx);
      await tx.query(`SELECT set_config('statement_timeout', '46s', true)`);
      const none = await runInTransaction(
        watched,
        budget(5_000),
        new Sql('SELECT g FROM generate_series(1, 0) AS g', []),
      );
      return { ordered, none, sent, afterRows, afterNone: await timeoutNow(tx) };
    });
    expect(result.ordered.map((r) => r.g)).toEqual([5, 4, 3]);
    expect(result.none).toEqual([]);
    expect(result.sent).toHaveLength(4);
    expect(result.afterRows).toBe('45s');
    expect(result.afterNone).toBe('46s');
  });
});
