import { describe, expect, it } from 'vitest';
import { postgresDialect, sqliteDialect } from './dialect.js';
import type { RowInsert } from './dialect.js';

const inserts: RowInsert[] = [
  {
    table: 'idx_a',
    columns: ['pk', 'v'],
    pgTypes: ['bigint', 'text'],
    rows: [
      [1, 'x'],
      [1, 'y'],
    ],
  },
  { table: 'idx_empty', columns: ['pk', 'v'], pgTypes: ['bigint', 'text'], rows: [] },
  { table: 'idx_b', columns: ['pk', 'n'], pgTypes: ['bigint', 'float8'], rows: [[1, 2.5]] },
];

describe('insertRows', () => {
  it('PostgreSQL: one statement for every table with rows, one array per column', () => {
    expect(postgresDialect.insertRows(inserts)).toEqual([
      {
        sql: 'WITH i0 AS (INSERT INTO idx_a (pk, v) SELECT * FROM unnest(?::bigint[], ?::text[])), i1 AS (INSERT INTO idx_b (pk, n) SELECT * FROM unnest(?::bigint[], ?::float8[])) SELECT 1',
        params: [[1, 1], ['x', 'y'], [1], [2.5]],
      },
    ]);
    expect(postgresDialect.insertRows([inserts[2]])).toEqual([
      { sql: 'INSERT INTO idx_b (pk, n) SELECT * FROM unnest(?::bigint[], ?::float8[])', params: [[1], [2.5]] },
    ]);
    expect(postgresDialect.insertRows([inserts[1]])).toEqual([]);
  });

  it('SQLite: multi-row VALUES per table, chunked under its limit on bound parameters', () => {
    expect(sqliteDialect.insertRows(inserts)).toEqual([
      { sql: 'INSERT INTO idx_a (pk, v) VALUES (?, ?), (?, ?)', params: [1, 'x', 1, 'y'] },
      { sql: 'INSERT INTO idx_b (pk, n) VALUES (?, ?)', params: [1, 2.5] },
    ]);
    const many = Array.from({ length: 12_000 }, (_, i) => [i, 'v']);
    const statements = sqliteDialect.insertRows([{ ...inserts[0], rows: many }]);
    expect(statements.map((s) => s.params.length)).toEqual([10_000, 10_000, 4_000]);
  });
});

describe('insertFirstVersion', () => {
  it('PostgreSQL: the resource row and its history row in one statement, the content bound once', () => {
    const { insert, then } = postgresDialect.insertFirstVersion('Patient', 'a', 1, '{}');
    expect(insert.sql).toMatch(
      /^WITH r AS \(INSERT INTO resource .* RETURNING pk, .*\), h AS \(INSERT INTO resource_history/,
    );
    expect(insert.params).toEqual(['Patient', 'a', 1, '{}']);
    expect(then(7)).toEqual([]);
  });
  it('SQLite: the history row copied from the inserted row by its pk', () => {
    const { insert, then } = sqliteDialect.insertFirstVersion('Patient', 'a', 1, '{}');
    expect(insert.params).toEqual(['Patient', 'a', 1, '{}']);
    const [history] = then(7);
    expect(history.sql).toContain('FROM resource WHERE pk = ?');
    expect(history.params).toEqual([7]);
  });
});

describe('totalEstimate', () => {
  it('PostgreSQL: EXPLAIN of the statement, kept an ad-hoc statement, and the planner rows read from its JSON', () => {
    const method = postgresDialect.totalEstimate;
    if (method.kind !== 'explain') throw new Error('PostgreSQL estimates with EXPLAIN');
    expect(method.explain('/*adhoc*/ SELECT r0.pk FROM resource r0')).toBe(
      '/*adhoc*/ EXPLAIN (FORMAT JSON) SELECT r0.pk FROM resource r0',
    );
    expect(method.explain('SELECT 1')).toBe('EXPLAIN (FORMAT JSON) SELECT 1');
    // node-postgres hands the json column over parsed; a driver that does not, as text.
    expect(method.rows({ 'QUERY PLAN': [{ Plan: { 'Plan Rows': 41.6 } }] })).toBe(42);
    expect(method.rows({ 'QUERY PLAN': JSON.stringify([{ Plan: { 'Plan Rows': 3 } }]) })).toBe(3);
  });
  it('SQLite: an exact count, stopped at 10,000', () => {
    expect(sqliteDialect.totalEstimate).toEqual({ kind: 'capped-count', cap: 10_000 });
  });
});

describe('transactionStatementTimeout', () => {
  it('PostgreSQL: SET LOCAL through set_config, answering the bound it replaces; a cancel is 57014', () => {
    const timeout = postgresDialect.transactionStatementTimeout!;
    expect(timeout.set).toContain("set_config('statement_timeout', ?, true)");
    expect(timeout.set).toContain('AS previous');
    expect(timeout.stopped(Object.assign(new Error('canceling statement'), { code: '57014' }))).toBe(true);
    expect(timeout.stopped(Object.assign(new Error('deadlock'), { code: '40P01' }))).toBe(false);
    expect(timeout.stopped(null)).toBe(false);
  });
  it('SQLite: none (the writer runs on the event loop)', () => {
    expect(sqliteDialect.transactionStatementTimeout).toBeUndefined();
  });
});

describe('transactionLock', () => {
  it('PostgreSQL: a transaction-scoped advisory lock on a text key; SQLite: none (BEGIN IMMEDIATE serialises)', () => {
    expect(postgresDialect.transactionLock).toBe('SELECT pg_advisory_xact_lock(hashtext(?))');
    expect(sqliteDialect.transactionLock).toBeUndefined();
  });
});
