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
  /** Column type of bytes (read back as a Buffer). */
  readonly blob: string;
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
   * Statements, run outside any transaction, that bring the planner's statistics up to date after many
   * writes to `tables`. PostgreSQL: `ANALYZE` (row counts and value distributions), or with `vacuum`
   * `VACUUM (ANALYZE)`, which also marks the pages written since all-visible, so that a search's index
   * range reads the index alone (a name prefix search cost PostgreSQL 490 µs before and 300 µs after,
   * most of the difference the heap pages of the index table it no longer reads); the visibility map
   * makes it skip the pages it has seen before. SQLite plans without statistics (the query shapes and
   * `probeColumn` fix its plans), so it needs nothing.
   */
  refreshStatistics(tables: readonly string[], vacuum: boolean): string[];
  /**
   * A statement, run outside any transaction, that makes the space of rows deleted from `table` free
   * again: PostgreSQL's plain `VACUUM` (it takes no lock that blocks reads or writes, frees the dead rows
   * and their TOAST for reuse, and gives the empty pages at the end of the table back to the file
   * system). Undefined on SQLite, which reuses freed pages on its own (an in-memory database has no file
   * to give back; file databases keep such data in files: SqlDatabase.localFolder).
   */
  reclaimSpace(table: string): string | undefined;
  /**
   * Created resources: each one's row (version 1, not deleted), its first history row, and its index and
   * link rows (each table's without its pk column, which takes the new pk). The `insert` statements
   * answer `pk`, `type` and `id` of every new row; then each statement of `then(pks)` (the pks in the
   * order of `creates`) runs. PostgreSQL: all of it one statement whatever the count (a data-modifying
   * WITH, each column an array), one round trip; SQLite: multi-row INSERTs of at most
   * SQLITE_ROWS_PER_INSERT rows, each history row on its own (see there).
   */
  insertNewResources(creates: readonly NewResource[]): {
    insert: { sql: string; params: SqlValue[] }[];
    then: (pks: readonly number[]) => { sql: string; params: SqlValue[] }[];
  };
  /**
   * True where `insertNewResources` is a single statement: a create outside a transaction then commits on
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
  /**
   * `columns` equal to one of `rows` (tuples of texts, one per column), in a text that is the same
   * whatever the number of rows and whatever they hold: the rows are bound as one JSON array on SQLite
   * (`IN (SELECT value FROM json_each(?))`, each element looked up in the index), one array per column on
   * PostgreSQL (`= ANY(?::text[])`, or `IN` an `unnest` of several, which the planner sizes from the
   * arrays). Each distinct statement text is a prepared statement the database keeps, so a text that
   * grew with an OR list made every search a new one (docs/search.md, "Memory").
   */
  equalsAny(columns: readonly string[], rows: readonly (readonly string[])[]): { sql: string; params: SqlValue[] };
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
  readonly transactionStatementTimeout:
    | {
        readonly set: string;
        /**
         * `sql` (a query) that sets the bound back to its first parameter as it runs, its own bound kept:
         * the server armed that when the statement started (search/transaction-runner.ts).
         */
        restoringWithin(sql: string): string;
        stopped(error: unknown): boolean;
      }
    | undefined;

  // --- Added by `db copy` (storage/copy/) ---

  /** A statement listing the tables of the database (its current schema on PostgreSQL), one `name` each. */
  readonly listTables: string;
  /**
   * Written after an INSERT's column list so that the rows keep the values given for an identity column
   * (PostgreSQL's GENERATED ALWAYS refuses them otherwise); empty on SQLite, which takes them as they are.
   */
  readonly identityInsert: string;
  /**
   * A statement that makes the identity column `column` of `table` number its next row after the largest
   * value in it, once rows were inserted with their own values; undefined on SQLite, whose AUTOINCREMENT
   * counter follows the largest value ever inserted by itself.
   */
  restartIdentity(table: string, column: string): string | undefined;
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

/** A resource to create: its first version's content and the index and link rows it adds. */
export interface NewResource {
  readonly type: string;
  readonly id: string;
  readonly lastUpdated: number;
  readonly content: string;
  readonly rows: readonly NewResourceRows[];
}

/** Each table's rows of all `creates`, with the pk column (bigint) first, taking each resource's `pkOf`. */
function rowsOfAll(creates: readonly NewResource[], pkOf: (index: number) => number): RowInsert[] {
  const byTable = new Map<string, { table: string; columns: string[]; pgTypes: string[]; rows: SqlValue[][] }>();
  creates.forEach((create, index) => {
    for (const { table, pkColumn, columns, pgTypes, rows } of create.rows) {
      if (rows.length === 0) continue;
      let merged = byTable.get(table);
      if (!merged) {
        merged = { table, columns: [pkColumn, ...columns], pgTypes: ['bigint', ...pgTypes], rows: [] };
        byTable.set(table, merged);
      }
      const pk = pkOf(index);
      // Copied by index: `[pk, ...row]` went through the array iterator, 7% of what an import allocated.
      for (const row of rows) {
        const withPk: SqlValue[] = new Array<SqlValue>(row.length + 1);
        withPk[0] = pk;
        for (let c = 0; c < row.length; c++) withPk[c + 1] = row[c];
        merged.rows.push(withPk);
      }
    }
  });
  return [...byTable.values()];
}

/**
 * PostgreSQL: the tables that have rows, and one array parameter per column of each, in order, each as
 * its array literal (pgArrayLiteral).
 */
function columnArrays<T extends RowInsert>(inserts: readonly T[]): { present: T[]; arrays: string[] } {
  const present = inserts.filter((insert) => insert.rows.length > 0);
  const arrays = present.flatMap(({ columns, rows }) => columns.map((_, c) => pgArrayLiteral(rows, c)));
  return { present, arrays };
}

const NEEDS_ESCAPE = /["\\]/;

/**
 * The PostgreSQL array literal of column `column` of `rows` (`{"a","b \\"c\\"",NULL,1.5}`), as the driver
 * would send the array (it sends arrays as text too), but escaping only a text that holds `"` or `\`:
 * the driver runs two replaces over every element, 7% of a PostgreSQL import's thread. Texts are always
 * quoted (an empty text, `NULL`, a comma or a brace in one are then plain text); numbers are written as
 * JavaScript prints them, which float8 and bigint read back exactly.
 */
export function pgArrayLiteral(rows: readonly (readonly SqlValue[])[], column: number): string {
  let literal = '{';
  for (let i = 0; i < rows.length; i++) {
    if (i > 0) literal += ',';
    const value = rows[i][column];
    if (value === null || value === undefined) literal += 'NULL';
    else if (typeof value === 'string') {
      literal += NEEDS_ESCAPE.test(value) ? `"${value.replace(/["\\]/g, '\\$&')}"` : `"${value}"`;
    } else if (typeof value === 'number' || typeof value === 'bigint') literal += String(value);
    else throw new TypeError('Index rows hold texts and numbers only');
  }
  return `${literal}}`;
}

/** PostgreSQL: `unnest` of one array parameter per column type, yielding the rows. */
const unnestOf = (pgTypes: readonly string[]): string => `unnest(${pgTypes.map((t) => `?::${t}[]`).join(', ')})`;

/** Between the contents of PostgreSQL's insertNewResources (see there). */
const CONTENT_SEPARATOR = '\u001e';

/** PostgreSQL's SQLSTATE for a statement cancelled (statement_timeout, pg_cancel_backend). */
export const PG_QUERY_CANCELED = '57014';

// SQLite's limit on bound parameters is 32766 (since 3.32); stay well below.
const SQLITE_MAX_PARAMS = 10_000;
/**
 * Rows per SQLite INSERT: every statement text (one per table, columns and row count up to this) is then
 * built once and prepared once (the connection keeps its statements by text), and a transaction's rows
 * of many resources go in statements of this many, not in one-off texts of thousands of rows.
 */
export const SQLITE_ROWS_PER_INSERT = 64;

/** INSERT texts by table, columns, row count and RETURNING: building them was 4% of an import's main thread. */
const sqliteInsertTexts = new Map<string, string>();

function sqliteInsertText(table: string, columns: readonly string[], rowCount: number, returning = ''): string {
  const key = `${table}(${columns.join(',')})${rowCount}${returning}`;
  let sql = sqliteInsertTexts.get(key);
  if (sql === undefined) {
    const tuple = `(${columns.map(() => '?').join(', ')})`;
    // OR FAIL: a multi-row INSERT whose constraints ABORT (NOT NULL, by default) opens a statement
    // journal, a copy of every page it changes, so that a failing row can undo the rows before it.
    // That copying was most of an import's system time (issue 13). Nothing needs it: these run in a
    // transaction that fails as a whole, or rolls back to its savepoint, when a statement fails.
    sql = `INSERT OR FAIL INTO ${table} (${columns.join(', ')}) VALUES ${Array(rowCount).fill(tuple).join(', ')}${
      returning ? ` RETURNING ${returning}` : ''
    }`;
    if (sqliteInsertTexts.size >= 2000) sqliteInsertTexts.clear();
    sqliteInsertTexts.set(key, sql);
  }
  return sql;
}

/** SQLite: multi-row INSERTs of `rows`, at most SQLITE_ROWS_PER_INSERT rows and SQLITE_MAX_PARAMS values each. */
function sqliteInserts(
  table: string,
  columns: readonly string[],
  rows: readonly (readonly SqlValue[])[],
  returning?: string,
): { sql: string; params: SqlValue[] }[] {
  const out: { sql: string; params: SqlValue[] }[] = [];
  const perStatement = Math.max(1, Math.min(SQLITE_ROWS_PER_INSERT, Math.floor(SQLITE_MAX_PARAMS / columns.length)));
  for (let i = 0; i < rows.length; i += perStatement) {
    const end = Math.min(rows.length, i + perStatement);
    const params: SqlValue[] = [];
    for (let r = i; r < end; r++) {
      const row = rows[r];
      for (let c = 0; c < row.length; c++) params.push(row[c]);
    }
    out.push({ sql: sqliteInsertText(table, columns, end - i, returning), params });
  }
  return out;
}

const RESOURCE_COLUMNS = ['type', 'id', 'version', 'last_updated', 'deleted', 'content'];

export const sqliteDialect: Dialect = {
  name: 'sqlite',
  autoIncrementPrimaryKey: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  bigint: 'INTEGER',
  blob: 'BLOB',
  forUpdate: '',
  placeholders: (sql) => sql,
  transactionLock: undefined,
  writePosition: undefined,
  ilike: 'LIKE',
  binaryText: 'TEXT',
  double: 'REAL',
  adhocStatement: '',
  insertRows: (inserts) => inserts.flatMap(({ table, columns, rows }) => sqliteInserts(table, columns, rows)),
  probeColumn: (column) => `+${column}`,
  driver: { open: ' IN (', close: ')' },
  probeSuffix: '',
  refreshStatistics: () => [],
  reclaimSpace: () => undefined,
  listTables: `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'`,
  identityInsert: '',
  restartIdentity: () => undefined,
  jsonIntegers: 'SELECT value FROM json_each(?)',
  jsonTexts: 'SELECT value FROM json_each(?)',
  equalsAny: (columns, rows) =>
    columns.length === 1
      ? { sql: `${columns[0]} IN (SELECT value FROM json_each(?))`, params: [JSON.stringify(rows.map((r) => r[0]))] }
      : {
          sql: `(${columns.join(', ')}) IN (SELECT ${columns.map((_, i) => `value ->> ${i}`).join(', ')} FROM json_each(?))`,
          params: [JSON.stringify(rows)],
        },
  insertNewResources(creates) {
    return {
      insert: sqliteInserts(
        'resource',
        RESOURCE_COLUMNS,
        creates.map((c) => [c.type, c.id, 1, c.lastUpdated, 0, c.content]),
        'pk, type, id',
      ),
      then: (pks) => [
        // One statement per history row: a statement that may write several rows and checks a foreign
        // key opens a statement journal (see sqliteInsertText), one of a single row does not.
        ...creates.map((c, i) => ({
          sql: `INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) VALUES (?, ?, ?, 1, ?, 'create', ?)`,
          params: [pks[i], c.type, c.id, c.lastUpdated, c.content],
        })),
        ...sqliteDialect.insertRows(rowsOfAll(creates, (i) => pks[i])),
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
  blob: 'BYTEA',
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
  equalsAny: (columns, rows) => ({
    sql:
      columns.length === 1
        ? `${columns[0]} = ANY(?::text[])`
        : `(${columns.join(', ')}) IN (SELECT * FROM unnest(${columns.map(() => '?::text[]').join(', ')}))`,
    params: columns.map((_, c) => pgArrayLiteral(rows, c)),
  }),
  insertNewResources(creates) {
    const history = `, h AS (INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) SELECT pk, type, id, version, last_updated, 'create', content FROM r)`;
    if (creates.length === 1) {
      // One resource (an API create): every row takes the one new pk, with no join (0.07 ms a create less
      // than the shape below, measured).
      const [{ type, id, lastUpdated, content, rows }] = creates;
      const { present, arrays } = columnArrays(rows);
      const insertRows = present.map(
        ({ table, pkColumn, columns, pgTypes }, i) =>
          `, i${i} AS (INSERT INTO ${table} (${pkColumn}, ${columns.join(', ')}) SELECT r.pk, u.* FROM r, ${unnestOf(pgTypes)} AS u)`,
      );
      return {
        insert: [
          {
            sql: `WITH r AS (INSERT INTO resource (type, id, version, last_updated, deleted, content) VALUES (?, ?, 1, ?, 0, ?) RETURNING pk, type, id, version, last_updated, content)${history}${insertRows.join('')} SELECT pk, type, id FROM r`,
            params: [type, id, lastUpdated, content, ...arrays],
          },
        ],
        then: () => [],
      };
    }
    // The index rows carry their resource's place in `creates` (`n`), joined to the new pks through `k`.
    const { present, arrays } = columnArrays(rowsOfAll(creates, (i) => i + 1));
    const insertRows = present.map(({ table, columns, pgTypes }, i) => {
      const [pkColumn, ...rest] = columns;
      const names = rest.map((_, c) => `v.c${c}`);
      return `, i${i} AS (INSERT INTO ${table} (${pkColumn}, ${rest.join(', ')}) SELECT k.pk, ${names.join(', ')} FROM k JOIN ${unnestOf(pgTypes)} AS v(n, ${rest.map((_, c) => `c${c}`).join(', ')}) ON v.n = k.n)`;
    });
    return {
      insert: [
        {
          sql:
            // The contents travel as one text split at U+001E: JSON.stringify escapes every control
            // character inside strings and writes none outside them, so no content holds one. As a text[]
            // parameter the driver escapes each content's quotes in JavaScript (8% of an import's thread).
            `WITH u AS (SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], string_to_array(?::text, chr(30))) WITH ORDINALITY AS u(type, id, last_updated, content, n))` +
            // ORDER BY n: the new pks follow the order of `creates`.
            `, r AS (INSERT INTO resource (type, id, version, last_updated, deleted, content) SELECT type, id, 1, last_updated, 0, content FROM u ORDER BY n RETURNING pk, type, id, version, last_updated, content)` +
            history +
            `, k AS (SELECT u.n, r.pk FROM u JOIN r ON r.type = u.type AND r.id = u.id)` +
            `${insertRows.join('')} SELECT pk, type, id FROM r`,
          params: [
            creates.map((c) => c.type),
            creates.map((c) => c.id),
            creates.map((c) => c.lastUpdated),
            creates.map((c) => c.content).join(CONTENT_SEPARATOR),
            ...arrays,
          ] as unknown as SqlValue[],
        },
      ],
      then: () => [],
    };
  },
  createIsOneStatement: true,
  concurrentWriters: true,
  reclaimSpace: (table) => `VACUUM ${table}`,
  listTables: `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`,
  identityInsert: ' OVERRIDING SYSTEM VALUE',
  restartIdentity: (table, column) =>
    `SELECT setval(pg_get_serial_sequence('${table}', '${column}'), (SELECT COALESCE(MAX(${column}), 0) + 1 FROM ${table}), false)`,
  refreshStatistics: (tables, vacuum) => [`${vacuum ? 'VACUUM (ANALYZE)' : 'ANALYZE'} ${tables.join(', ')}`],
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
    // jit off for the rest of the transaction too: behind a transaction pooler the connection may not
    // have it (postgres-database.ts, SESSION_OPTIONS), and JIT compilation ignores statement_timeout.
    set: `SELECT current_setting('statement_timeout') AS previous, set_config('statement_timeout', ?, true) AS bound, set_config('jit', 'off', true) AS jit`,
    // The restore in a MATERIALIZED CTE read by a one-time filter: evaluated once, before the first row,
    // even when the query returns none; the query's rows come through in their order.
    restoringWithin: (sql) =>
      `WITH bound_restore AS MATERIALIZED (SELECT set_config('statement_timeout', ?, true) AS previous) ` +
      `SELECT bounded.* FROM (${sql}) AS bounded WHERE (SELECT previous FROM bound_restore) IS NOT NULL`,
    stopped: (error) => (error as { code?: unknown } | null)?.code === PG_QUERY_CANCELED,
  },
};
