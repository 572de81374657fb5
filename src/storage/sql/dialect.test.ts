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

  it('SQLite: multi-row VALUES per table (OR FAIL: no statement journal), chunked under its limit on bound parameters', () => {
    expect(sqliteDialect.insertRows(inserts)).toEqual([
      { sql: 'INSERT OR FAIL INTO idx_a (pk, v) VALUES (?, ?), (?, ?)', params: [1, 'x', 1, 'y'] },
      { sql: 'INSERT OR FAIL INTO idx_b (pk, n) VALUES (?, ?)', params: [1, 2.5] },
    ]);
    const many = Array.from({ length: 12_000 }, (_, i) => [i, 'v']);
    const statements = sqliteDialect.insertRows([{ ...inserts[0], rows: many }]);
    expect(statements.map((s) => s.params.length)).toEqual([10_000, 10_000, 4_000]);
  });
});

describe('insertNewResource', () => {
  const rows = [
    {
      table: 'idx_string',
      pkColumn: 'pk',
      columns: ['sp', 'grp', 'norm', 'exact'],
      pgTypes: ['bigint', 'int', 'text', 'text'],
      rows: [
        [5, 0, 'a', 'A'],
        [6, 1, 'b', 'B'],
      ],
    },
    {
      table: 'idx_token',
      pkColumn: 'pk',
      columns: ['sp', 'grp', 'system', 'code', 'text'],
      pgTypes: ['bigint', 'int', 'text', 'text', 'text'],
      rows: [],
    },
    {
      table: 'resource_link',
      pkColumn: 'source_pk',
      columns: ['target_type', 'target_id'],
      pgTypes: ['text', 'text'],
      rows: [['Patient', 'p1']],
    },
  ];

  it('PostgreSQL: the resource, its history row and every table with rows in one statement, each taking the new pk', () => {
    const { insert, then } = postgresDialect.insertNewResource('Patient', 'a', 1, '{}', rows);
    expect(insert.sql).toMatch(
      /^WITH r AS \(INSERT INTO resource .* RETURNING pk, .*\), h AS \(INSERT INTO resource_history/,
    );
    expect(insert.sql).toContain(
      'i0 AS (INSERT INTO idx_string (pk, sp, grp, norm, exact) SELECT r.pk, u.* FROM r, unnest(?::bigint[], ?::int[], ?::text[], ?::text[]) AS u)',
    );
    expect(insert.sql).toContain(
      'i1 AS (INSERT INTO resource_link (source_pk, target_type, target_id) SELECT r.pk, u.* FROM r, unnest(?::text[], ?::text[]) AS u)',
    );
    expect(insert.sql).not.toContain('idx_token');
    expect(insert.sql.endsWith(' SELECT pk FROM r')).toBe(true);
    // The content bound once; then one array per column.
    expect(insert.params).toEqual([
      'Patient',
      'a',
      1,
      '{}',
      [5, 6],
      [0, 1],
      ['a', 'b'],
      ['A', 'B'],
      ['Patient'],
      ['p1'],
    ]);
    expect(then(7)).toEqual([]);
    expect(postgresDialect.createIsOneStatement).toBe(true);
  });

  it('SQLite: the history row as one row of VALUES with the new pk, then the rows with the pk put first', () => {
    const { insert, then } = sqliteDialect.insertNewResource('Patient', 'a', 1, '{}', rows);
    expect(insert.params).toEqual(['Patient', 'a', 1, '{}']);
    const [history, strings, links, ...rest] = then(7);
    expect(history.sql).toBe(
      "INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) VALUES (?, ?, ?, 1, ?, 'create', ?)",
    );
    expect(history.params).toEqual([7, 'Patient', 'a', 1, '{}']);
    expect(strings.sql).toBe(
      'INSERT OR FAIL INTO idx_string (pk, sp, grp, norm, exact) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)',
    );
    expect(strings.params).toEqual([7, 5, 0, 'a', 'A', 7, 6, 1, 'b', 'B']);
    expect(links.sql).toBe('INSERT OR FAIL INTO resource_link (source_pk, target_type, target_id) VALUES (?, ?, ?)');
    expect(links.params).toEqual([7, 'Patient', 'p1']);
    expect(rest).toEqual([]);
    expect(sqliteDialect.createIsOneStatement).toBe(false);
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
