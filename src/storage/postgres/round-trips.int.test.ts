// Round trips to PostgreSQL, counted at node-postgres (every Client's query and connect), for the promises
// of postgres-database.ts: one host needs no probe before the first statement; a search connection costs
// one round trip more (its statement_timeout), once; behind a transaction pooler a search's transaction,
// bound, jit setting and server process are one round trip before its statement.
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { postgresTestDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { openDatabase } from '../open-database.js';
import type { ReadBudget, SqlDatabase } from '../sql/database.js';

const budget = (): ReadBudget => ({ deadline: performance.now() + 10_000, limitMs: 10_000 });

/** The texts of the statements node-postgres sends, and the connections it opens, from now on. */
function roundTrips(): { statements: string[]; connections: () => number } {
  const statements: string[] = [];
  const query = pg.Client.prototype.query;
  vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const [first] = args as [string | { text: string }];
    statements.push(typeof first === 'string' ? first : first.text);
    return (query as (...a: unknown[]) => unknown).apply(this, args) as never;
  });
  const connect = vi.spyOn(pg.Client.prototype, 'connect');
  return { statements, connections: () => connect.mock.calls.length };
}

describe('round trips to PostgreSQL', () => {
  let database: TestDatabase;
  const opened: SqlDatabase[] = [];
  const open = (url: string, options: Parameters<typeof openDatabase>[1] = {}) => {
    const db = openDatabase(url, options);
    opened.push(db);
    return db;
  };

  beforeAll(async () => {
    database = await postgresTestDatabase();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    for (const db of opened) await db.close();
    await database?.dispose();
  });

  it('one host: the first statement goes without a probe; a primary to choose costs one', async () => {
    const single = roundTrips();
    await open(database.url).query('SELECT 1 AS one');
    expect(single.statements).toEqual(['SELECT 1 AS one']);
    expect(single.connections()).toBe(1);
    vi.restoreAllMocks();

    const url = new URL(database.url);
    url.searchParams.set('target_session_attrs', 'read-write');
    const choosing = roundTrips();
    await open(url.toString()).query('SELECT 1 AS one');
    expect(choosing.statements).toEqual(['SELECT pg_is_in_recovery() AS standby', 'SELECT 1 AS one']);
    expect(choosing.connections()).toBe(2);
  });

  it('a search connection costs one round trip more, its statement_timeout, on its first search only', async () => {
    const db = open(database.url);
    await db.query('SELECT 1 AS one');
    const first = roundTrips();
    await db.boundedQuery('SELECT 2 AS two', [], budget());
    expect(first.statements).toEqual([expect.stringMatching(/^SET statement_timeout = \d+$/), 'SELECT 2 AS two']);
    vi.restoreAllMocks();
    const again = roundTrips();
    await db.boundedQuery('SELECT 3 AS three', [], budget());
    expect(again.statements).toEqual(['SELECT 3 AS three']);
  });

  it('behind a transaction pooler, a search sets up its transaction in one round trip before its statement', async () => {
    const db = open(database.url, { postgresPooler: 'transaction' });
    await db.boundedQuery('SELECT 1 AS one', [], budget());
    const sent = roundTrips();
    await db.boundedQuery('SELECT 2 AS two', [], budget());
    expect(sent.statements).toHaveLength(3);
    const [setUp, statement, end] = sent.statements;
    expect(setUp).toMatch(/^BEGIN READ ONLY; SELECT pg_backend_pid\(\)/);
    expect(setUp).toContain("set_config('statement_timeout'");
    expect(setUp).toContain("set_config('jit', 'off', true)");
    expect([statement, end]).toEqual(['SELECT 2 AS two', 'COMMIT']);
  });
});
