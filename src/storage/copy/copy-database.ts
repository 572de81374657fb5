// `db copy`: every table of one database (normally SQLite) into an empty PostgreSQL database, rows as
// they are (pks, ids, versions, index rows), then each table counted and checksummed on both sides from
// the rows as read back. The whole copy is one transaction on the target, committed only when every
// table agrees: a copy that fails or differs leaves the target as empty as it was, ready to run again.
// Rows are read in batches by keyset pagination over each table's key, bounded by count and by bytes,
// so memory stays bounded whatever the size of the database. Design and use: docs/postgres.md.
import { MIGRATIONS } from '../migrations/index.js';
import type { Row, SqlDatabase, SqlExecutor, SqlValue } from '../sql/database.js';
import { TableSum } from './checksum.js';
import type { CopiedTable } from './tables.js';
import { COPIED_TABLES, TABLES_NOT_COPIED } from './tables.js';

export interface BatchLimits {
  /** Rows a batch reads at most (a grouped table's batch adds the rest of its last resource's rows). */
  readonly rows: number;
  /** Bytes of long values a batch reads at most, unless its first row alone is larger. */
  readonly bytes: number;
}

export const DEFAULT_BATCH_LIMITS: BatchLimits = { rows: 2000, bytes: 8 * 1024 * 1024 };

/** Parameters of one INSERT at most (PostgreSQL takes 65,535, SQLite 32,766). */
const MAX_PARAMS = 30_000;
/** Rows of one INSERT at most. */
const MAX_ROWS_PER_INSERT = 500;

/**
 * The rows of `table` in key order, a batch at a time. Each batch first reads the keys and the bytes of
 * the long values of up to `limits.rows` rows, takes the leading ones that fit `limits.bytes` (at least
 * one), then reads those rows whole: a key range, so a grouped table's batch holds whole groups.
 */
export async function* tableBatches(
  db: SqlExecutor,
  table: CopiedTable,
  limits: BatchLimits = DEFAULT_BATCH_LIMITS,
): AsyncGenerator<Row[]> {
  const keys = table.key.join(', ');
  const tuple = `(${keys})`;
  const marks = `(${table.key.map(() => '?').join(', ')})`;
  const bytes = table.long.length === 0 ? '0' : table.long.map((c) => `COALESCE(octet_length(${c}), 0)`).join(' + ');
  const sizesAfter = (first: boolean) =>
    `SELECT ${keys}, ${bytes} AS copy_bytes FROM ${table.name}${first ? '' : ` WHERE ${tuple} > ${marks}`} ORDER BY ${keys} LIMIT ?`;
  const rowsUpTo = (first: boolean) =>
    `SELECT * FROM ${table.name} WHERE ${first ? '' : `${tuple} > ${marks} AND `}${tuple} <= ${marks} ORDER BY ${keys}`;
  let after: SqlValue[] | undefined;
  for (;;) {
    const sizes = await db.query<Row>(sizesAfter(after === undefined), [...(after ?? []), limits.rows]);
    if (sizes.length === 0) return;
    let end = 0;
    let total = Number(sizes[0].copy_bytes);
    while (end + 1 < sizes.length && total + Number(sizes[end + 1].copy_bytes) <= limits.bytes) {
      total += Number(sizes[++end].copy_bytes);
    }
    const upTo = table.key.map((column) => sizes[end][column] as SqlValue);
    yield await db.query<Row>(rowsUpTo(after === undefined), [...(after ?? []), ...upTo]);
    after = upTo;
  }
}

/**
 * Hands each batch of `batches` to `handle` while the next one is read (a statement on the way to one
 * database while the other works): two batches in memory at most.
 */
async function eachBatch(batches: AsyncGenerator<Row[]>, handle: (batch: Row[]) => Promise<void>): Promise<void> {
  try {
    let item = await batches.next();
    while (!item.done) {
      const next = batches.next();
      [, item] = await Promise.all([handle(item.value), next]);
    }
  } finally {
    await batches.return(undefined);
  }
}

/** Inserts `rows` (all of `table`, with the same columns) as they are, identity values included. */
async function insertRows(tx: SqlExecutor, table: CopiedTable, rows: readonly Row[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]);
  const perStatement = Math.max(1, Math.min(MAX_ROWS_PER_INSERT, Math.floor(MAX_PARAMS / columns.length)));
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const overriding = table.identity ? tx.dialect.identityInsert : '';
  for (let start = 0; start < rows.length; start += perStatement) {
    const chunk = rows.slice(start, start + perStatement);
    const params: SqlValue[] = [];
    for (const row of chunk) for (const column of columns) params.push(row[column] as SqlValue);
    // Ad hoc: the text varies with the row count, and PostgreSQL would keep each as a prepared statement.
    await tx.execute(
      `${tx.dialect.adhocStatement}INSERT INTO ${table.name} (${columns.join(', ')})${overriding} VALUES ${Array<string>(chunk.length).fill(tuple).join(', ')}`,
      params,
    );
  }
}

export interface TableCount {
  readonly rows: number;
  /** 64 hexadecimal digits (checksum.ts). */
  readonly checksum: string;
}

export interface TableReport {
  readonly table: string;
  readonly source: TableCount;
  readonly target: TableCount;
  readonly agrees: boolean;
}

export interface CopyReport {
  readonly tables: readonly TableReport[];
  /** Every count and checksum agrees, and the copy was committed. */
  readonly agrees: boolean;
  readonly seconds: number;
}

/** Where the copy stands: `rows` of the `total` of `table` copied, or read back from the target. */
export interface CopyProgress {
  readonly phase: 'copy' | 'verify';
  readonly table: string;
  readonly rows: number;
  readonly total: number;
}

export interface CopyOptions {
  readonly limits?: BatchLimits;
  readonly onProgress?: (progress: CopyProgress) => void;
}

/** Why a target is refused ("is not empty: ..."), undefined when it may be copied into. */
export async function targetRefusal(target: SqlExecutor): Promise<string | undefined> {
  const present = new Set((await target.query<{ name: string }>(target.dialect.listTables)).map((r) => r.name));
  if (present.has('schema_migration')) {
    const [{ newest }] = await target.query<{ newest: number | null }>(
      'SELECT MAX(version) AS newest FROM schema_migration',
    );
    const ours = Math.max(...MIGRATIONS.map((m) => m.version));
    if (newest !== null && Number(newest) > ours) {
      return `has the schema of a newer ambient-fhir (migration ${newest}; this one knows up to ${ours})`;
    }
  }
  // Our tables, but for the rows the migrations create themselves.
  const ours = [
    ...COPIED_TABLES.filter((t) => !t.seeded).map((t) => t.name),
    ...Object.keys(TABLES_NOT_COPIED).filter((name) => name !== 'schema_migration'),
  ];
  const holding: string[] = [];
  for (const name of ours) {
    if (present.has(name) && (await target.query(`SELECT 1 AS one FROM ${name} LIMIT 1`)).length > 0) {
      holding.push(name);
    }
  }
  if (holding.length === 0) return undefined;
  return `is not empty: ${holding.join(', ')} ${holding.length > 1 ? 'hold' : 'holds'} rows`;
}

/** Counts and checksums `table` on `db`, from its rows as read. */
async function sumTable(
  db: SqlExecutor,
  table: CopiedTable,
  limits: BatchLimits,
  onBatch: (rows: number) => void,
): Promise<TableCount> {
  const sum = new TableSum();
  await eachBatch(tableBatches(db, table, limits), async (batch) => {
    for (const row of batch) sum.add(row);
    onBatch(sum.rows);
  });
  return { rows: sum.rows, checksum: sum.checksum };
}

class CopyDiffers extends Error {
  constructor(readonly tables: TableReport[]) {
    super('the copy differs from the source');
  }
}

/**
 * Copies every table of COPIED_TABLES from `source` into `target` (migrated, and empty: targetRefusal),
 * then verifies each. The report says whether every table agrees; only then is the copy committed
 * (refreshCopiedStatistics comes after).
 */
export async function copyDatabase(
  source: SqlDatabase,
  target: SqlDatabase,
  options: CopyOptions = {},
): Promise<CopyReport> {
  const started = performance.now();
  const limits = options.limits ?? DEFAULT_BATCH_LIMITS;
  const progress = options.onProgress ?? (() => undefined);
  const totals = new Map<string, number>();
  for (const table of COPIED_TABLES) {
    const [{ n }] = await source.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table.name}`);
    totals.set(table.name, Number(n));
  }
  let tables: TableReport[];
  try {
    tables = await target.transaction(async (tx) => {
      for (const table of COPIED_TABLES.filter((t) => t.seeded)) await tx.execute(`DELETE FROM ${table.name}`);
      for (const table of COPIED_TABLES) {
        const total = totals.get(table.name) ?? 0;
        let rows = 0;
        progress({ phase: 'copy', table: table.name, rows, total });
        await eachBatch(tableBatches(source, table, limits), async (batch) => {
          await insertRows(tx, table, batch);
          rows += batch.length;
          progress({ phase: 'copy', table: table.name, rows, total });
        });
        const restart = table.identity && tx.dialect.restartIdentity(table.name, table.identity);
        if (restart) await tx.query(restart);
      }
      // Both sides read afresh: a source written to during the copy no longer agrees with it.
      const reports: TableReport[] = [];
      for (const table of COPIED_TABLES) {
        const total = totals.get(table.name) ?? 0;
        progress({ phase: 'verify', table: table.name, rows: 0, total });
        const [sourceCount, targetCount] = await Promise.all([
          sumTable(source, table, limits, () => undefined),
          sumTable(tx, table, limits, (rows) => progress({ phase: 'verify', table: table.name, rows, total })),
        ]);
        const agrees = sourceCount.rows === targetCount.rows && sourceCount.checksum === targetCount.checksum;
        reports.push({ table: table.name, source: sourceCount, target: targetCount, agrees });
      }
      if (reports.some((r) => !r.agrees)) throw new CopyDiffers(reports);
      return reports;
    });
  } catch (error) {
    if (!(error instanceof CopyDiffers)) throw error;
    return { tables: error.tables, agrees: false, seconds: (performance.now() - started) / 1000 };
  }
  return { tables, agrees: true, seconds: (performance.now() - started) / 1000 };
}

/**
 * After a copy: the planner's statistics, and on PostgreSQL the visibility map, for the first searches
 * (run outside any transaction: VACUUM cannot run inside one).
 */
export async function refreshCopiedStatistics(target: SqlDatabase): Promise<void> {
  const statements = target.dialect.refreshStatistics(
    COPIED_TABLES.map((t) => t.name),
    true,
  );
  for (const statement of statements) await target.execute(statement);
}
