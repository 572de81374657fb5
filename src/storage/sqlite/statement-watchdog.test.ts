// The writer's watchdog (statement-watchdog.ts) and the safety net it gives write transactions
// (sqlite-database.ts): a statement stopped at its deadline, and never one it was not armed for.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import BetterSqlite3 from 'better-sqlite3';
import { StatementInterruptedError } from '../sql/database.js';
import { testDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { interruptExtensionPath } from './read-pool.js';
import { SqliteDatabase } from './sqlite-database.js';
import { WatchdogThread } from './statement-watchdog.js';
import type { StatementWatchdog } from './statement-watchdog.js';

/** Counts to `n`: about a second per 10 million here. */
const COUNT = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c';

describe('StatementWatchdog', () => {
  // Two connections on one thread, as a database has them: one armed now and then (the writer), one
  // ticking (the inline reader).
  const connection = new BetterSqlite3(':memory:');
  const ticking = new BetterSqlite3(':memory:');
  let thread: WatchdogThread;
  let watchdog: StatementWatchdog;
  let tickingWatchdog: StatementWatchdog;

  beforeAll(() => {
    thread = new WatchdogThread(interruptExtensionPath()!);
    watchdog = thread.watch(connection)!;
    tickingWatchdog = thread.watch(ticking, { tickMs: 5 })!;
    expect(watchdog).toBeDefined();
    expect(tickingWatchdog).toBeDefined();
  });
  afterAll(async () => {
    await thread.close();
    connection.close();
    ticking.close();
  });

  const count = (n: number, on = connection) => (on.prepare(COUNT).get(n) as { n: number }).n;

  it('stops a statement at its deadline, and the connection goes on', () => {
    const started = performance.now();
    expect(() => watchdog.run(performance.now() + 100, () => count(1_000_000_000))).toThrow(StatementInterruptedError);
    // Generous: the statement alone runs for minutes.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(watchdog.run(performance.now() + 5_000, () => count(1000))).toBe(1000);
  });

  it('never stops a statement it was not armed for', async () => {
    // Armed and finished well before their deadlines: nothing may reach the statements after them.
    for (let i = 0; i < 1000; i++) {
      const on = i % 2 === 0 ? connection : ticking;
      expect((i % 2 === 0 ? watchdog : tickingWatchdog).run(performance.now() + 30, () => count(10, on))).toBe(10);
    }
    await new Promise((resolve) => setTimeout(resolve, 60));
    // Past every deadline armed above, unarmed: runs to its end.
    expect(count(3_000_000)).toBe(3_000_000);
    expect(count(3_000_000, ticking)).toBe(3_000_000);
    // Armed with a later deadline than the statement needs.
    expect(watchdog.run(performance.now() + 60_000, () => count(3_000_000))).toBe(3_000_000);
  });

  it('stops a statement of either connection at its own deadline, whatever the other armed before', () => {
    // The thread now sleeps towards a deadline a minute away: the next arm, earlier, must wake it.
    expect(watchdog.run(performance.now() + 60_000, () => count(10))).toBe(10);
    const started = performance.now();
    expect(() => tickingWatchdog.run(performance.now() + 50, () => count(1_000_000_000, ticking))).toThrow(
      StatementInterruptedError,
    );
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(() => watchdog.run(performance.now() + 50, () => count(1_000_000_000))).toThrow(StatementInterruptedError);
    expect(count(10, ticking)).toBe(10);
  });

  it('stops a statement that starts only after its deadline has passed (the first interrupt found nothing running)', () => {
    for (const [dog, on] of [
      [watchdog, connection],
      [tickingWatchdog, ticking],
    ] as const) {
      const started = performance.now();
      expect(() =>
        dog.run(performance.now() + 1, () => {
          // The main thread held up between the arm and the statement (a GC pause, a slow prepare): the
          // thread fires into an idle connection, which SQLite ignores.
          while (performance.now() - started < 30);
          return count(1_000_000_000, on);
        }),
      ).toThrow(StatementInterruptedError);
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(count(10, on)).toBe(10);
    }
  });

  it('watches nothing where the extension does not load', () => {
    expect(new WatchdogThread('/nonexistent/sqlite-interrupt.so').watch(new BetterSqlite3(':memory:'))).toBeUndefined();
  });
});

describe("the safety net of the SQLite writer's transactions", () => {
  let testDb: TestDatabase;
  let db: SqliteDatabase;

  beforeAll(async () => {
    testDb = await testDatabase('sqlite');
    db = new SqliteDatabase(testDb.url, { readWorkers: 0, writeStatementLimitMs: 200 });
    await db.execute('CREATE TABLE net_probe (v INTEGER NOT NULL)');
  });
  afterAll(async () => {
    await db.close();
    await testDb.dispose();
  });

  const runaway = `INSERT INTO net_probe (v) SELECT x FROM (${COUNT}) AS c, (SELECT 1 AS x)`;

  it('stops a write statement that runs away, rolls its transaction back, and the writer goes on', async () => {
    const started = performance.now();
    await expect(
      db.transaction(async (tx) => {
        await tx.execute('INSERT INTO net_probe (v) VALUES (?)', [1]);
        await tx.execute(runaway, [1_000_000_000]);
      }),
    ).rejects.toBeInstanceOf(StatementInterruptedError);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await db.query('SELECT v FROM net_probe')).toEqual([]);
    await db.transaction((tx) => tx.execute('INSERT INTO net_probe (v) VALUES (?)', [2]));
    expect(await db.query('SELECT v FROM net_probe')).toEqual([{ v: 2 }]);
  });

  it('fails only the transaction that ran away in a group commit; the others run again and commit', async () => {
    await db.execute('DELETE FROM net_probe');
    const outcomes = await Promise.allSettled([
      db.transaction((tx) => tx.execute('INSERT INTO net_probe (v) VALUES (?)', [10])),
      db.transaction(async (tx) => {
        await tx.execute('INSERT INTO net_probe (v) VALUES (?)', [11]);
        // A statement that swallows its interrupt and goes on must not write outside the transaction.
        await tx.execute(runaway, [1_000_000_000]).catch(() => undefined);
        await tx.execute('INSERT INTO net_probe (v) VALUES (?)', [12]);
      }),
      db.transaction((tx) => tx.execute('INSERT INTO net_probe (v) VALUES (?)', [13])),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(StatementInterruptedError);
    const rows = await db.query<{ v: number }>('SELECT v FROM net_probe ORDER BY v');
    expect(rows.map((r) => r.v)).toEqual([10, 13]);
  });
});
