import { describe, expect, it } from 'vitest';
import { pgArrayLiteral, postgresDialect, SQLITE_ROWS_PER_INSERT, sqliteDialect } from './dialect.js';
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

describe('pgArrayLiteral', () => {
  it('quotes every text, escapes only quotes and backslashes, writes NULL and numbers bare', () => {
    const rows = [['plain'], ['a "q" \\ b'], [''], ['NULL'], ['a, {b}'], [null], [1.5], [-2], [1e-7], [12345678901234]];
    expect(pgArrayLiteral(rows, 0)).toBe(
      '{"plain","a \\"q\\" \\\\ b","","NULL","a, {b}",NULL,1.5,-2,1e-7,12345678901234}',
    );
    expect(pgArrayLiteral([], 0)).toBe('{}');
    expect(() => pgArrayLiteral([[Buffer.from('x')]], 0)).toThrow(TypeError);
  });
});

describe('insertRows', () => {
  it('PostgreSQL: one statement for every table with rows, one array per column', () => {
    expect(postgresDialect.insertRows(inserts)).toEqual([
      {
        sql: 'WITH i0 AS (INSERT INTO idx_a (pk, v) SELECT * FROM unnest(?::bigint[], ?::text[])), i1 AS (INSERT INTO idx_b (pk, n) SELECT * FROM unnest(?::bigint[], ?::float8[])) SELECT 1',
        params: ['{1,1}', '{"x","y"}', '{1}', '{2.5}'],
      },
    ]);
    expect(postgresDialect.insertRows([inserts[2]])).toEqual([
      { sql: 'INSERT INTO idx_b (pk, n) SELECT * FROM unnest(?::bigint[], ?::float8[])', params: ['{1}', '{2.5}'] },
    ]);
    expect(postgresDialect.insertRows([inserts[1]])).toEqual([]);
  });

  it('SQLite: multi-row VALUES per table (OR FAIL: no statement journal), at most SQLITE_ROWS_PER_INSERT rows each', () => {
    expect(sqliteDialect.insertRows(inserts)).toEqual([
      { sql: 'INSERT OR FAIL INTO idx_a (pk, v) VALUES (?, ?), (?, ?)', params: [1, 'x', 1, 'y'] },
      { sql: 'INSERT OR FAIL INTO idx_b (pk, n) VALUES (?, ?)', params: [1, 2.5] },
    ]);
    const many = Array.from({ length: 1_000 }, (_, i) => [i, 'v']);
    const statements = sqliteDialect.insertRows([{ ...inserts[0], rows: many }]);
    expect(statements.map((s) => s.params.length / 2)).toEqual([...Array(15).fill(SQLITE_ROWS_PER_INSERT), 40]);
    // Each text is the same for the same row count, so the connection prepares it once.
    expect(new Set(statements.map((s) => s.sql)).size).toBe(2);
  });
});

describe('insertNewResources', () => {
  const rows = (a: string, link: string[][]) => [
    {
      table: 'idx_string',
      pkColumn: 'pk',
      columns: ['sp', 'grp', 'norm', 'exact'],
      pgTypes: ['bigint', 'int', 'text', 'text'],
      rows: [
        [5, 0, a, a.toUpperCase()],
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
      rows: link,
    },
  ];
  const creates = [
    { type: 'Patient', id: 'a', lastUpdated: 1, content: '{"a":1}', rows: rows('a', [['Patient', 'p1']]) },
    { type: 'Patient', id: 'b', lastUpdated: 2, content: '{"b":2}', rows: rows('c', []) },
  ];

  it('PostgreSQL: every resource, its history row and each table of rows in one statement, rows joined to their new pk by place', () => {
    const { insert, then } = postgresDialect.insertNewResources(creates);
    expect(insert).toHaveLength(1);
    const [{ sql, params }] = insert;
    expect(sql).toMatch(
      /^WITH u AS \(SELECT \* FROM unnest\(\?::text\[\], \?::text\[\], \?::bigint\[\], string_to_array\(\?::text, chr\(30\)\)\) WITH ORDINALITY AS u\(type, id, last_updated, content, n\)\), r AS \(INSERT INTO resource .* FROM u ORDER BY n RETURNING pk, .*\), h AS \(INSERT INTO resource_history .* FROM r\), k AS \(SELECT u.n, r.pk FROM u JOIN r ON r.type = u.type AND r.id = u.id\)/,
    );
    expect(sql).toContain(
      'i0 AS (INSERT INTO idx_string (pk, sp, grp, norm, exact) SELECT k.pk, v.c0, v.c1, v.c2, v.c3 FROM k JOIN unnest(?::bigint[], ?::bigint[], ?::int[], ?::text[], ?::text[]) AS v(n, c0, c1, c2, c3) ON v.n = k.n)',
    );
    expect(sql).toContain(
      'i1 AS (INSERT INTO resource_link (source_pk, target_type, target_id) SELECT k.pk, v.c0, v.c1 FROM k JOIN unnest(?::bigint[], ?::text[], ?::text[]) AS v(n, c0, c1) ON v.n = k.n)',
    );
    expect(sql).not.toContain('idx_token');
    expect(sql.endsWith(' SELECT pk, type, id FROM r')).toBe(true);
    // One array per column: the resources', then each table's rows with their resource's place (1-based).
    expect(params).toEqual([
      ['Patient', 'Patient'],
      ['a', 'b'],
      [1, 2],
      '{"a":1}\u001e{"b":2}',
      '{1,1,2,2}',
      '{5,6,5,6}',
      '{0,1,0,1}',
      '{"a","b","c","b"}',
      '{"A","B","C","B"}',
      '{1}',
      '{"Patient"}',
      '{"p1"}',
    ]);
    expect(then([7, 8])).toEqual([]);
    expect(postgresDialect.createIsOneStatement).toBe(true);
  });

  it('PostgreSQL: one resource (an API create) in one statement whose rows take the new pk without a join', () => {
    const { insert, then } = postgresDialect.insertNewResources([creates[0]]);
    expect(insert).toHaveLength(1);
    const [{ sql, params }] = insert;
    expect(sql).toMatch(
      /^WITH r AS \(INSERT INTO resource \(type, id, version, last_updated, deleted, content\) VALUES \(\?, \?, 1, \?, 0, \?\) RETURNING pk, .*\), h AS \(INSERT INTO resource_history .* FROM r\)/,
    );
    expect(sql).toContain(
      'i0 AS (INSERT INTO idx_string (pk, sp, grp, norm, exact) SELECT r.pk, u.* FROM r, unnest(?::bigint[], ?::int[], ?::text[], ?::text[]) AS u)',
    );
    expect(sql).toContain(
      'i1 AS (INSERT INTO resource_link (source_pk, target_type, target_id) SELECT r.pk, u.* FROM r, unnest(?::text[], ?::text[]) AS u)',
    );
    expect(sql.endsWith(' SELECT pk, type, id FROM r')).toBe(true);
    expect(params).toEqual([
      'Patient',
      'a',
      1,
      '{"a":1}',
      '{5,6}',
      '{0,1}',
      '{"a","b"}',
      '{"A","B"}',
      '{"Patient"}',
      '{"p1"}',
    ]);
    expect(then([7])).toEqual([]);
  });

  it('SQLite: the resources in multi-row INSERTs answering their pks, each history row on its own, then every table of rows with the pks put first', () => {
    const { insert, then } = sqliteDialect.insertNewResources(creates);
    expect(insert).toEqual([
      {
        sql: 'INSERT OR FAIL INTO resource (type, id, version, last_updated, deleted, content) VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?) RETURNING pk, type, id',
        params: ['Patient', 'a', 1, 1, 0, '{"a":1}', 'Patient', 'b', 1, 2, 0, '{"b":2}'],
      },
    ]);
    const [history1, history2, strings, links, ...rest] = then([7, 8]);
    expect(history1.sql).toBe(
      "INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) VALUES (?, ?, ?, 1, ?, 'create', ?)",
    );
    expect([history1.params, history2.params]).toEqual([
      [7, 'Patient', 'a', 1, '{"a":1}'],
      [8, 'Patient', 'b', 2, '{"b":2}'],
    ]);
    expect(strings.sql).toBe(
      'INSERT OR FAIL INTO idx_string (pk, sp, grp, norm, exact) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?), (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)',
    );
    expect(strings.params).toEqual([7, 5, 0, 'a', 'A', 7, 6, 1, 'b', 'B', 8, 5, 0, 'c', 'C', 8, 6, 1, 'b', 'B']);
    expect(links.sql).toBe('INSERT OR FAIL INTO resource_link (source_pk, target_type, target_id) VALUES (?, ?, ?)');
    expect(links.params).toEqual([7, 'Patient', 'p1']);
    expect(rest).toEqual([]);
    expect(sqliteDialect.createIsOneStatement).toBe(false);
  });

  it('SQLite: a thousand resources in INSERTs of 64 rows at most', () => {
    const many = Array.from({ length: 1000 }, (_, i) => ({ ...creates[0], id: `p${i}` }));
    const { insert, then } = sqliteDialect.insertNewResources(many);
    expect(insert.map((s) => s.params.length / 6)).toEqual([...Array(15).fill(SQLITE_ROWS_PER_INSERT), 40]);
    const strings = then(many.map((_, i) => i + 1)).filter((s) => s.sql.includes('idx_string'));
    expect(strings.map((s) => s.params.length / 5)).toEqual([...Array(31).fill(64), 16]);
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

describe('equalsAny', () => {
  const rows = [
    ['a"b', 'x'],
    ['c\\d', '{y}'],
  ];
  it('SQLite: one JSON array, elements by position for a tuple', () => {
    expect(sqliteDialect.equalsAny(['t.c'], rows)).toEqual({
      sql: 't.c IN (SELECT value FROM json_each(?))',
      params: ['["a\\"b","c\\\\d"]'],
    });
    expect(sqliteDialect.equalsAny(['t.c', 't.s'], rows)).toEqual({
      sql: '(t.c, t.s) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))',
      params: [JSON.stringify(rows)],
    });
  });
  it('PostgreSQL: one text array per column', () => {
    expect(postgresDialect.equalsAny(['t.c'], rows)).toEqual({
      sql: 't.c = ANY(?::text[])',
      params: ['{"a\\"b","c\\\\d"}'],
    });
    expect(postgresDialect.equalsAny(['t.c', 't.s'], rows)).toEqual({
      sql: '(t.c, t.s) IN (SELECT * FROM unnest(?::text[], ?::text[]))',
      params: ['{"a\\"b","c\\\\d"}', '{"x","{y}"}'],
    });
  });
});
