// Every difference between SQLite and PostgreSQL SQL that the rest of the code needs, in one object.
import type { SqlValue } from './database.js';

export interface Dialect {
  /**
   * For messages and tests only: code outside this file never branches on it, it asks the dialect for
   * the SQL or the capability instead (dialect-boundary.test.ts keeps it so).
   */
  readonly name: 'sqlite' | 'postgres';
  /** Column type of an auto-incrementing 64-bit primary key. */
  readonly autoIncrementPrimaryKey: string;
  /** 64-bit integer column type. */
  readonly bigint: string;
  /** Suffix that locks the selected rows until the end of the transaction (none on SQLite: writers are serialised). */
  readonly forUpdate: string;
  /** Rewrites `?` placeholders into the backend's form. */
  placeholders(sql: string): string;
  /**
   * A statement taking one text parameter that holds a lock on that key until the transaction ends, or
   * undefined where transactions are serialised anyway (SQLite).
   */
  readonly transactionLock: string | undefined;
  /** Case-insensitive LIKE operator. */
  readonly ilike: string;

  // --- Added by the search engine (search/, storage/migrations/003-search-indexes.ts) ---

  /**
   * Text column compared byte by byte, so a B-tree range [prefix, next(prefix)) is exactly "starts with"
   * and comparisons skip locale rules: SQLite's default BINARY, PostgreSQL's "C" collation.
   */
  readonly binaryText: string;
  /** 64-bit floating point column type. */
  readonly double: string;
  /**
   * Marks a statement whose text depends on the request (searches): PostgreSQL runs it as an unnamed
   * statement, planned for its actual values each time, instead of a named prepared statement that
   * could switch to a generic plan and that would pile up per connection (see postgres-database.ts).
   */
  readonly adhocStatement: string;
  /**
   * The database's write position, for read-your-writes on replicas (storage/write-positions.ts):
   * `now` the expression for the position now (PostgreSQL's WAL position as text), `later(a, b)` the
   * expression for the later of two; undefined where there are no replicas.
   */
  readonly writePosition: { readonly now: string; later(a: string, b: string): string } | undefined;
  /**
   * Statements inserting rows into one or more tables, as few as the backend allows: on PostgreSQL
   * one statement for all of them (each table an `unnest` in a data-modifying WITH, so a write's index
   * rows cost one round trip whatever their count), on SQLite multi-row VALUES per table in chunks
   * under its limit on bound parameters.
   */
  insertRows(inserts: readonly RowInsert[]): { sql: string; params: SqlValue[] }[];
  /**
   * A column term the planner must not use an index for. Index probes of one resource
   * (`t.pk = r.pk AND t.sp = ?`) must go through the (pk, sp) index; without statistics SQLite would
   * rather use (sp, value...) and scan every row of the parameter for each candidate, and PostgreSQL
   * does so too when the value range looks small. SQLite's unary `+` says so, `+ 0` on PostgreSQL.
   */
  probeColumn(column: string): string;
  /**
   * How the search's driving criterion is written (`<pk> IN (<subquery>)` as the SQL reads): on
   * PostgreSQL `pk = ANY(ARRAY(subquery))`, which runs the index range scan first and then fetches the
   * few rows it names, instead of a merge join that walks the resource table in pk order.
   */
  readonly driver: { readonly open: string; readonly close: string };
  /**
   * Appended inside an EXISTS probe: on PostgreSQL `OFFSET 0` keeps it a per-row index probe (a
   * SubPlan) rather than a semi-join over every index row of the parameter, so a broad search stops
   * after one page (see docs/search.md, "Plans").
   */
  readonly probeSuffix: string;
  /**
   * Statements that bring the planner's statistics up to date after many writes to `tables`. PostgreSQL:
   * `ANALYZE` (row counts and value distributions) or, after a bulk load, `VACUUM (ANALYZE)`, which also
   * marks the pages all-visible so that index-only scans skip the table. SQLite plans without
   * statistics (the query shapes and `probeColumn` fix its plans), so it needs nothing.
   */
  refreshStatistics(tables: readonly string[], afterBulkLoad: boolean): string[];
  /**
   * A created resource: its row (version 1, not deleted), its first history row, and `rows` (the index
   * and link rows, each table's without its pk column, which takes the new pk). `insert` answers `pk`,
   * then each statement of `then(pk)` runs. PostgreSQL: all of it one statement (a data-modifying WITH,
   * the content sent once, each table's rows as `unnest` arrays), one round trip; SQLite: the history
   * row copied from the row by its pk, then multi-row INSERTs as `insertRows`.
   */
  insertNewResource(
    type: string,
    id: string,
    lastUpdated: number,
    content: string,
    rows: readonly NewResourceRows[],
  ): { insert: { sql: string; params: SqlValue[] }; then: (pk: number) => { sql: string; params: SqlValue[] }[] };
  /**
   * True where `insertNewResource` is a single statement: a create outside a transaction then commits on
   * its own, without BEGIN and COMMIT (PostgreSQL: two round trips instead of five). SQLite's creates go
   * through its group commit instead, which shares one WAL fsync between concurrent writes.
   */
  readonly createIsOneStatement: boolean;
  /**
   * True where concurrent transactions write in parallel (PostgreSQL's backends), so a bulk load gains by
   * keeping several in flight; SQLite runs every write on the one writer connection in the event loop.
   */
  readonly concurrentWriters: boolean;
  /**
   * A subquery (one `?`: a JSON array of integers) yielding each integer: the frontier of an include,
   * bound per round into one statement text compiled once.
   */
  readonly jsonIntegers: string;
  /** A subquery (one `?`: a JSON array of strings) yielding each string. */
  readonly jsonTexts: string;
  /** Statements deleting every row of `pk` from each table. */
  deleteByPk(tables: readonly string[], pk: number): { sql: string; params: SqlValue[] }[];
  /**
   * How `_total=estimate` is answered. PostgreSQL (`explain`): the planner's row estimate for the
   * matches query, from `EXPLAIN (FORMAT JSON)` (`explain` rewrites the statement text, `rows` reads
   * the estimate from its one row), never a scan. SQLite keeps no row estimates (`capped-count`): an
   * exact count stopped after `cap` matches; above it the total is left out.
   */
  readonly totalEstimate: TotalEstimate;
  /**
   * Bounding the statements of an open transaction (a search inside a transaction Bundle). PostgreSQL:
   * `set` takes the bound in ms as text (one `?`) and answers the bound it replaces as `previous`, to be
   * set back the same way afterwards (`set_config(..., true)` is `SET LOCAL`: it ends with the
   * transaction); `stopped(error)` tells a statement stopped at the bound. undefined on SQLite: the
   * transaction runs on the writer connection in the event loop, where nothing can stop a statement.
   */
  readonly transactionStatementTimeout: { readonly set: string; stopped(error: unknown): boolean } | undefined;
}

export type TotalEstimate =
  | { readonly kind: 'explain'; explain(sql: string): string; rows(row: Record<string, unknown>): number }
  | { readonly kind: 'capped-count'; readonly cap: number };

/** Rows for one table: `columns` in order, with their PostgreSQL array types for `unnest`. */
export interface RowInsert {
  readonly table: string;
  readonly columns: readonly string[];
  readonly pgTypes: readonly string[];
  readonly rows: readonly (readonly SqlValue[])[];
}

/** A new resource's rows for one table, without the pk column `pkColumn` (its value is not known yet). */
export interface NewResourceRows extends RowInsert {
  readonly pkColumn: string;
}

/** The rows with the new resource's pk put first. */
function withPk(rows: readonly NewResourceRows[], pk: number): RowInsert[] {
  return rows.map(({ table, pkColumn, columns, pgTypes, rows: values }) => ({
    table,
    columns: [pkColumn, ...columns],
    pgTypes: ['bigint', ...pgTypes],
    rows: values.map((row) => [pk, ...row]),
  }));
}

/** PostgreSQL: the tables that have rows, and one array parameter per column of each, in order. */
function columnArrays<T extends RowInsert>(inserts: readonly T[]): { present: T[]; arrays: SqlValue[] } {
  const present = inserts.filter((insert) => insert.rows.length > 0);
  const arrays = present.flatMap(({ columns, rows }) => columns.map((_, c) => rows.map((row) => row[c])));
  return { present, arrays: arrays as unknown as SqlValue[] };
}

/** PostgreSQL: `unnest` of one array parameter per column type, yielding the rows. */
const unnestOf = (pgTypes: readonly string[]): string => `unnest(${pgTypes.map((t) => `?::${t}[]`).join(', ')})`;

/** PostgreSQL's SQLSTATE for a statement cancelled (statement_timeout, pg_cancel_backend). */
export const PG_QUERY_CANCELED = '57014';

// SQLite's limit on bound parameters is 32766 (since 3.32); stay well below.
const SQLITE_MAX_PARAMS = 10_000;

/**
 * INSERT texts by table, columns and row count: a few dozen recur, and building them was 4% of an
 * import's main thread. Texts of up to CACHED_ROW_COUNT rows are kept (at most about 2 MB in all).
 */
const sqliteInsertTexts = new Map<string, string>();
const CACHED_ROW_COUNT = 64;

function sqliteInsertText(table: string, columns: readonly string[], rowCount: number): string {
  const key = rowCount <= CACHED_ROW_COUNT ? `${table}(${columns.join(',')})${rowCount}` : undefined;
  let sql = key === undefined ? undefined : sqliteInsertTexts.get(key);
  if (sql === undefined) {
    const tuple = `(${columns.map(() => '?').join(', ')})`;
    // OR FAIL: a multi-row INSERT whose constraints ABORT (NOT NULL, by default) opens a statement
    // journal, a copy of every page it changes, so that a failing row can undo the rows before it.
    // That copying was most of an import's system time (issue 13). Nothing needs it: these run in a
    // transaction that fails as a whole, or rolls back to its savepoint, when a statement fails.
    sql = `INSERT OR FAIL INTO ${table} (${columns.join(', ')}) VALUES ${Array(rowCount).fill(tuple).join(', ')}`;
    if (key !== undefined) {
      if (sqliteInsertTexts.size >= 1000) sqliteInsertTexts.clear();
      sqliteInsertTexts.set(key, sql);
    }
  }
  return sql;
}

export const sqliteDialect: Dialect = {
  name: 'sqlite',
  autoIncrementPrimaryKey: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  bigint: 'INTEGER',
  forUpdate: '',
  placeholders: (sql) => sql,
  transactionLock: undefined,
  writePosition: undefined,
  ilike: 'LIKE',
  binaryText: 'TEXT',
  double: 'REAL',
  adhocStatement: '',
  insertRows(inserts) {
    const out: { sql: string; params: SqlValue[] }[] = [];
    for (const { table, columns, rows } of inserts) {
      const perStatement = Math.max(1, Math.floor(SQLITE_MAX_PARAMS / columns.length));
      for (let i = 0; i < rows.length; i += perStatement) {
        const chunk = rows.slice(i, i + perStatement);
        const params: SqlValue[] = [];
        for (const row of chunk) for (const value of row) params.push(value);
        out.push({ sql: sqliteInsertText(table, columns, chunk.length), params });
      }
    }
    return out;
  },
  probeColumn: (column) => `+${column}`,
  driver: { open: ' IN (', close: ')' },
  probeSuffix: '',
  refreshStatistics: () => [],
  jsonIntegers: 'SELECT value FROM json_each(?)',
  jsonTexts: 'SELECT value FROM json_each(?)',
  insertNewResource(type, id, lastUpdated, content, rows) {
    return {
      insert: {
        sql: 'INSERT INTO resource (type, id, version, last_updated, deleted, content) VALUES (?, ?, 1, ?, 0, ?) RETURNING pk',
        params: [type, id, lastUpdated, content],
      },
      then: (pk) => [
        {
          // VALUES, not INSERT ... SELECT from the new row: a statement that may write several rows and
          // checks a foreign key opens a statement journal (see insertRows), one of a single row does not.
          sql: `INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) VALUES (?, ?, ?, 1, ?, 'create', ?)`,
          params: [pk, type, id, lastUpdated, content],
        },
        ...sqliteDialect.insertRows(withPk(rows, pk)),
      ],
    };
  },
  createIsOneStatement: false,
  concurrentWriters: false,
  deleteByPk: (tables, pk) => tables.map((table) => ({ sql: `DELETE FROM ${table} WHERE pk = ?`, params: [pk] })),
  totalEstimate: { kind: 'capped-count', cap: 10_000 },
  transactionStatementTimeout: undefined,
};

const ADHOC = '/*adhoc*/ ';

export const postgresDialect: Dialect = {
  name: 'postgres',
  autoIncrementPrimaryKey: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY',
  bigint: 'BIGINT',
  forUpdate: ' FOR UPDATE',
  transactionLock: 'SELECT pg_advisory_xact_lock(hashtext(?))',
  writePosition: {
    now: 'pg_current_wal_lsn()::text',
    later: (a, b) => `GREATEST((${a})::pg_lsn, (${b})::pg_lsn)::text`,
  },
  placeholders: (sql) => {
    let n = 0;
    return sql.replace(/\?/g, () => `$${++n}`);
  },
  ilike: 'ILIKE',
  binaryText: 'TEXT COLLATE "C"',
  double: 'DOUBLE PRECISION',
  adhocStatement: ADHOC,
  insertRows(inserts) {
    // One array per column, whatever the row count: one statement text per set of tables.
    const { present, arrays } = columnArrays(inserts);
    if (present.length === 0) return [];
    const insert = ({ table, columns, pgTypes }: RowInsert) =>
      `INSERT INTO ${table} (${columns.join(', ')}) SELECT * FROM ${unnestOf(pgTypes)}`;
    const sql =
      present.length === 1
        ? insert(present[0])
        : `WITH ${present.map((p, i) => `i${i} AS (${insert(p)})`).join(', ')} SELECT 1`;
    return [{ sql, params: arrays }];
  },
  // `sp + 0`, as SQLite's `+sp`: with `sp` usable, PostgreSQL probed `gender=female` through
  // (sp, code, system, pk), reading the whole `female` range per candidate (3.3 ms → 0.6 ms a page at
  // 2,400 Patients, growing with the table).
  probeColumn: (column) => `(${column} + 0)`,
  driver: { open: ' = ANY(ARRAY(', close: '))' },
  probeSuffix: ' OFFSET 0',
  jsonIntegers: 'SELECT jsonb_array_elements_text(?::jsonb)::bigint',
  jsonTexts: 'SELECT jsonb_array_elements_text(?::jsonb)',
  insertNewResource(type, id, lastUpdated, content, rows) {
    const { present, arrays } = columnArrays(rows);
    const insertRows = present.map(
      ({ table, pkColumn, columns, pgTypes }, i) =>
        `, i${i} AS (INSERT INTO ${table} (${pkColumn}, ${columns.join(', ')}) SELECT r.pk, u.* FROM r, ${unnestOf(pgTypes)} AS u)`,
    );
    return {
      insert: {
        sql: `WITH r AS (INSERT INTO resource (type, id, version, last_updated, deleted, content) VALUES (?, ?, 1, ?, 0, ?) RETURNING pk, type, id, version, last_updated, content), h AS (INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) SELECT pk, type, id, version, last_updated, 'create', content FROM r)${insertRows.join('')} SELECT pk FROM r`,
        params: [type, id, lastUpdated, content, ...arrays],
      },
      then: () => [],
    };
  },
  createIsOneStatement: true,
  concurrentWriters: true,
  refreshStatistics: (tables, afterBulkLoad) => [
    `${afterBulkLoad ? 'VACUUM (ANALYZE)' : 'ANALYZE'} ${tables.join(', ')}`,
  ],
  deleteByPk: (tables, pk) => [
    {
      sql: `WITH ${tables.map((table, i) => `d${i} AS (DELETE FROM ${table} WHERE pk = ?)`).join(', ')} SELECT 1`,
      params: tables.map(() => pk),
    },
  ],
  totalEstimate: {
    kind: 'explain',
    explain: (sql) =>
      sql.startsWith(ADHOC)
        ? `${ADHOC}EXPLAIN (FORMAT JSON) ${sql.slice(ADHOC.length)}`
        : `EXPLAIN (FORMAT JSON) ${sql}`,
    rows: (row) => {
      const explained = Object.values(row)[0];
      const json = (typeof explained === 'string' ? JSON.parse(explained) : explained) as {
        Plan: { 'Plan Rows': number };
      }[];
      return Math.round(json[0].Plan['Plan Rows']);
    },
  },
  transactionStatementTimeout: {
    set: `SELECT current_setting('statement_timeout') AS previous, set_config('statement_timeout', ?, true) AS bound`,
    stopped: (error) => (error as { code?: unknown } | null)?.code === PG_QUERY_CANCELED,
  },
};
