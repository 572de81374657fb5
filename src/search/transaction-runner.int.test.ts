// Search statements inside an open transaction (transaction-runner.ts), on both databases: they see
// the transaction's writes, and the budget stops them as far as the backend allows.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../storage/open-database.js';
import { BudgetExceededError } from '../storage/sql/database.js';
import type { ReadBudget, SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { Sql } from './sql/fragment.js';
import { transactionRunner } from './transaction-runner.js';

const budget = (ms: number, signal?: AbortSignal): ReadBudget => ({
  deadline: performance.now() + ms,
  limitMs: ms,
  signal,
});

describe.each(BACKENDS)('transactionRunner on %s', (backend) => {
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
      return transactionRunner(tx, budget(5_000))(new Sql('SELECT v FROM runner_probe WHERE v = ?', [41]));
    });
    expect(seen.map((r) => Number(r.v))).toEqual([41]);
  });

  it('refuses to start a statement past the deadline or after the client went away', async () => {
    const aborted = new AbortController();
    aborted.abort();
    await db.transaction(async (tx) => {
      const statement = new Sql('SELECT 1 AS one', []);
      await expect(transactionRunner(tx, budget(-1))(statement)).rejects.toMatchObject({ reason: 'deadline' });
      await expect(transactionRunner(tx, budget(5_000, aborted.signal))(statement)).rejects.toBeInstanceOf(
        BudgetExceededError,
      );
    });
  });
});

// PostgreSQL only: SQLite's writer runs on the event loop, where nothing can stop a statement.
describe('transactionRunner on postgres: the local statement_timeout', () => {
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

  it('stops a statement at the time left and sets the previous bound back after each', async () => {
    const bounds = await db.transaction(async (tx) => {
      const before = (await tx.query<{ statement_timeout: string }>('SHOW statement_timeout'))[0].statement_timeout;
      await transactionRunner(tx, budget(5_000))(new Sql('SELECT 1 AS one', []));
      const after = (await tx.query<{ statement_timeout: string }>('SHOW statement_timeout'))[0].statement_timeout;
      return { before, after };
    });
    expect(bounds.after).toBe(bounds.before);
    const started = performance.now();
    await expect(
      db.transaction((tx) => transactionRunner(tx, budget(200))(new Sql('SELECT pg_sleep(5)', []))),
    ).rejects.toMatchObject({ reason: 'deadline', limitMs: 200 });
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
