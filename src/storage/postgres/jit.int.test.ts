// JIT compilation is out of reach of every connection the server opens (postgres-database.ts,
// SESSION_OPTIONS): LLVM compiling a statement checks for no interrupt, so a search past
// `jit_above_cost` outlived its budget and every cancel. Read through the server's own pools, as
// `serve` opens them (openDatabase): main, search, transaction, pooler mode, a streaming replica.
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresServersUnavailable,
  removeServers,
  startPrimary,
  startStandby,
} from '../../../test/support/pg-servers.js';
import type { PgServer } from '../../../test/support/pg-servers.js';
import { postgresTestDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { raw } from '../../search/sql/fragment.js';
import { runInTransaction, withTransactionRunner } from '../../search/transaction-runner.js';
import { openDatabase } from '../open-database.js';
import type { ReadBudget, SqlDatabase } from '../sql/database.js';
import { withSessionOptions } from './postgres-database.js';

const budget = (ms = 10_000): ReadBudget => ({ deadline: performance.now() + ms, limitMs: ms });

/**
 * A statement the planner costs far past `jit_above_cost` (each set-returning function with a
 * non-constant bound is guessed at 1,000 rows: 10^9 joined) that runs in microseconds (8 rows).
 */
const COSTLY = `EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM generate_series(1, (random() + 2)::int) a,
  generate_series(1, (random() + 2)::int) b, generate_series(1, (random() + 2)::int) c WHERE a + b + c > 1`;

/** Whether the plan of COSTLY as `run` answers it was JIT-compiled. */
async function jitCompiled(run: (sql: string) => Promise<Record<string, unknown>[]>): Promise<boolean> {
  const [row] = await run(COSTLY);
  const explained = Object.values(row)[0];
  const plan = (typeof explained === 'string' ? JSON.parse(explained) : explained) as Record<string, unknown>[];
  return 'JIT' in plan[0];
}

async function onPlainClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

describe('withSessionOptions', () => {
  it("adds jit=off after the URL's own options", () => {
    const url = withSessionOptions('postgres://u:p@h:5432/db?sslmode=disable&options=-c%20search_path%3Ds1');
    const params = new URL(url).searchParams;
    expect(params.get('options')).toBe('-c search_path=s1 -c jit=off');
    expect(params.get('sslmode')).toBe('disable');
    expect(new URL(withSessionOptions('postgres://h/db')).searchParams.get('options')).toBe('-c jit=off');
  });
});

describe('PostgreSQL connections run with JIT off', () => {
  let test: TestDatabase;
  let db: SqlDatabase;
  let pooled: SqlDatabase;
  let jitAvailable: boolean;

  beforeAll(async () => {
    test = await postgresTestDatabase();
    db = openDatabase(test.url);
    pooled = openDatabase(test.url, { postgresPooler: 'transaction' });
    // The premise: without the server's settings this server does JIT-compile COSTLY.
    jitAvailable = await onPlainClient(test.url, async (client) => {
      const { rows } = await client.query('SELECT pg_jit_available() AS available, current_setting($1) AS jit', [
        'jit',
      ]);
      return rows[0].available === true && rows[0].jit === 'on';
    });
  });

  afterAll(async () => {
    await db?.close();
    await pooled?.close();
    await test?.dispose();
  });

  it('JIT-compiles the costly statement on a plain connection (the premise)', async (context) => {
    if (!jitAvailable) context.skip();
    expect(
      await onPlainClient(test.url, async (client) => jitCompiled(async (sql) => (await client.query(sql)).rows)),
    ).toBe(true);
  });

  it('on the main pool, the search pool and in a transaction, keeping the URL options', async () => {
    const [main] = await db.query<{ jit: string; search_path: string }>(
      "SELECT current_setting('jit') AS jit, current_setting('search_path') AS search_path",
    );
    expect(main.jit).toBe('off');
    // The schema the test URL's own `options` chose is still in force.
    expect(main.search_path).toBe(new URL(test.url).searchParams.get('options')!.split('=')[1]);
    const [search] = await db.boundedQuery<{ jit: string }>("SELECT current_setting('jit') AS jit", [], budget());
    expect(search.jit).toBe('off');
    const inTransaction = await db.transaction(async (tx) => tx.query<{ jit: string }>('SHOW jit'));
    expect(inTransaction[0].jit).toBe('off');
    if (jitAvailable) {
      expect(await jitCompiled((sql) => db.query(sql))).toBe(false);
      expect(await jitCompiled((sql) => db.boundedQuery(sql, [], budget()))).toBe(false);
    }
  });

  it('behind a transaction pooler, for each search and each search of a transaction Bundle', async () => {
    const [search] = await pooled.boundedQuery<{ jit: string }>('SHOW jit', [], budget());
    expect(search.jit).toBe('off');
    const rows = await pooled.transaction(async (tx) =>
      withTransactionRunner(tx, budget(), (run) => run(raw('SHOW jit'))),
    );
    expect(rows[0].jit).toBe('off');
    // Conditional criteria: one statement that sets the bound back within itself.
    const criteria = await pooled.transaction(async (tx) => {
      await runInTransaction(tx, budget(), raw('SELECT 1 AS one'));
      return tx.query<{ jit: string }>('SHOW jit');
    });
    expect(criteria[0].jit).toBe('off');
    if (jitAvailable) expect(await jitCompiled((sql) => pooled.boundedQuery(sql, [], budget()))).toBe(false);
  });
});

const serversUnavailable = postgresServersUnavailable();

describe.skipIf(serversUnavailable)('PostgreSQL replicas and a chosen primary run with JIT off', () => {
  let primary: PgServer;
  let standby: PgServer;
  let db: SqlDatabase;

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary);
    // Both hosts in DATABASE_URL: the writable one is looked for (acceptsWrites), then used.
    const hosts = `${new URL(standby.url).host},${new URL(primary.url).host}`;
    db = openDatabase(`postgres://postgres@${hosts}/postgres?target_session_attrs=read-write`, {
      databaseReadUrls: [standby.url],
    });
  }, 120_000);

  afterAll(async () => {
    await db?.close();
    removeServers([standby, primary]);
  });

  it('reads on the replica and writes on the primary with jit off', async () => {
    const sql = "SELECT pg_is_in_recovery() AS standby, current_setting('jit') AS jit";
    let onReplica: { standby: boolean; jit: string } | undefined;
    for (let i = 0; i < 100 && !onReplica?.standby; i++) {
      [onReplica] = await db.replicaQuery<{ standby: boolean; jit: string }>(sql, []);
      if (!onReplica.standby) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(onReplica).toEqual({ standby: true, jit: 'off' });
    const [search] = await db.boundedQuery<{ standby: boolean; jit: string }>(sql, [], budget());
    expect(search).toEqual({ standby: true, jit: 'off' });
    const [main] = await db.query<{ standby: boolean; jit: string }>(sql);
    expect(main).toEqual({ standby: false, jit: 'off' });
  });
});
