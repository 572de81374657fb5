// The index tables (created by storage/migrations/003-search-indexes.ts; docs/search.md has a worked
// example). Every row carries the resource's `pk`, the search parameter's `sp` id (a hash of
// `ResourceType.code`, see catalog.ts) and `grp`, the element instance a composite's components came
// from (0 for ordinary rows). The column lists here must match the migration.
import type { SqlValue } from '../storage/sql/database.js';

export type IndexTable =
  'idx_string' | 'idx_token' | 'idx_date' | 'idx_number' | 'idx_quantity' | 'idx_reference' | 'idx_uri';

export interface TableShape {
  /** Value columns after (pk, sp, grp): the values an extraction produces, in this order. */
  readonly columns: readonly string[];
  /** PostgreSQL array types of (pk, sp, grp, ...columns), for the one-statement `unnest` insert. */
  readonly pgTypes: readonly string[];
  /** The indexed text columns among `columns`: each holds its value's key (see INDEX_KEY_LENGTH). */
  readonly keyed: readonly string[];
}

/**
 * Code points of a value an index entry holds. PostgreSQL refuses a B-tree entry over 2,704 bytes (a
 * third of a page) and R4 strings may be 1 MB, so a long value is indexed by this prefix (its key) and
 * kept whole beside it in `<column>_full` (NULL when the key is the whole value); searches compare the
 * key through the index, then the whole value (sql/keyed.ts). 256 code points of at most 4 UTF-8 bytes,
 * twice (idx_token and idx_quantity index two keyed columns), fit one entry with room to spare, and
 * hold nearly every code, name and URL whole. Changing it needs a migration that re-keys stored rows.
 */
export const INDEX_KEY_LENGTH = 256;

/** The column holding the whole value of a keyed column whose value is longer than its key. */
export const fullColumn = (column: string): string => `${column}_full`;

/** Code points in `value`, counted up to INDEX_KEY_LENGTH + 1. */
function keyLength(value: string): number {
  if (value.length <= INDEX_KEY_LENGTH) return value.length === 0 ? 0 : [...value].length;
  let end = 0;
  let count = 0;
  while (end < value.length && count <= INDEX_KEY_LENGTH) {
    end += (value.codePointAt(end) ?? 0) > 0xffff ? 2 : 1;
    count++;
  }
  return count;
}

/** The first INDEX_KEY_LENGTH code points of `value` (all of it when shorter): what the index holds. */
export function indexKey(value: string): string {
  if (value.length <= INDEX_KEY_LENGTH) return value;
  let end = 0;
  for (let count = 0; count < INDEX_KEY_LENGTH && end < value.length; count++) {
    end += (value.codePointAt(end) ?? 0) > 0xffff ? 2 : 1;
  }
  return value.slice(0, end);
}

/**
 * How `value` relates to keys: `short` (shorter than a key: a key equal to it is the whole stored
 * value), `full` (exactly a key long: equal keys may still belong to longer values), `long` (longer
 * than a key: only its key is in the index).
 */
export function keyFit(value: string): 'short' | 'full' | 'long' {
  const length = keyLength(value);
  return length < INDEX_KEY_LENGTH ? 'short' : length === INDEX_KEY_LENGTH ? 'full' : 'long';
}

const KEY_TYPES = ['bigint', 'bigint', 'int'];

export const INDEX_TABLES: Record<IndexTable, TableShape> = {
  // `exact` and `text` are not indexed: they hold whole values.
  idx_string: { columns: ['norm', 'exact'], pgTypes: [...KEY_TYPES, 'text', 'text'], keyed: ['norm'] },
  idx_token: {
    columns: ['system', 'code', 'text'],
    pgTypes: [...KEY_TYPES, 'text', 'text', 'text'],
    keyed: ['system', 'code'],
  },
  idx_date: { columns: ['lo', 'hi'], pgTypes: [...KEY_TYPES, 'bigint', 'bigint'], keyed: [] },
  idx_number: { columns: ['lo', 'hi'], pgTypes: [...KEY_TYPES, 'float8', 'float8'], keyed: [] },
  idx_quantity: {
    columns: ['system', 'code', 'lo', 'hi'],
    pgTypes: [...KEY_TYPES, 'text', 'text', 'float8', 'float8'],
    keyed: ['system', 'code'],
  },
  // target_type is a resource type or ''; target_id a local id (64 characters at most) or a whole URL.
  idx_reference: {
    columns: ['target_type', 'target_id'],
    pgTypes: [...KEY_TYPES, 'text', 'text'],
    keyed: ['target_id'],
  },
  idx_uri: { columns: ['uri'], pgTypes: [...KEY_TYPES, 'text'], keyed: ['uri'] },
};

export const TABLE_NAMES = Object.keys(INDEX_TABLES) as IndexTable[];

/** The columns a table's rows are written to, after (pk, sp, grp): its columns, then the full columns. */
export function storedColumns(table: IndexTable): string[] {
  const shape = INDEX_TABLES[table];
  return [...shape.columns, ...shape.keyed.map(fullColumn)];
}

/** PostgreSQL array types of (pk, sp, grp, ...storedColumns(table)). */
export function storedPgTypes(table: IndexTable): string[] {
  const shape = INDEX_TABLES[table];
  return [...shape.pgTypes, ...shape.keyed.map(() => 'text')];
}

/**
 * An extracted row ([sp, grp, ...columns], whole values) as written ([sp, grp, ...storedColumns]): each
 * keyed column's key, and its whole value in the full column when longer than the key.
 */
export function storedRow(table: IndexTable, row: IndexRow): IndexRow {
  const positions = KEYED_POSITIONS[table];
  if (positions.length === 0) return row;
  const stored = row.slice();
  for (const at of positions) {
    const value = row[at];
    const key = typeof value === 'string' && value.length > INDEX_KEY_LENGTH ? indexKey(value) : value;
    stored[at] = key;
    stored.push(key === value ? null : value);
  }
  return stored;
}

/** Where each table's keyed columns are in an extracted row. */
const KEYED_POSITIONS = Object.fromEntries(
  TABLE_NAMES.map((table) => {
    const { columns, keyed } = INDEX_TABLES[table];
    return [table, keyed.map((column) => 2 + columns.indexOf(column))];
  }),
) as Record<IndexTable, number[]>;

/** A row without its pk: [sp, grp, ...values]. */
export type IndexRow = SqlValue[];

/** Thrown by RowSink.add when a resource needs more rows than the sink's limit. */
export class RowLimitExceeded extends Error {}

/** Rows of one parameter in one table compared element by element up to this many, then by a text key. */
const FEW_ROWS = 16;

/**
 * Collects the index rows of one resource, without duplicates, up to `limit` rows: past it `add` throws
 * at once, so a resource over the limit costs no more to refuse than one at the limit costs to index.
 * Duplicates are looked for among the rows of the same table and parameter: directly while there are
 * few (a text key for every row was 5% of an import's thread), by text key past FEW_ROWS.
 */
export class RowSink {
  readonly rows = new Map<IndexTable, IndexRow[]>();
  private readonly byParameter = new Map<IndexTable, Map<SqlValue, IndexRow[] | Set<string>>>();
  private count = 0;

  constructor(private readonly limit = Number.POSITIVE_INFINITY) {}

  add(table: IndexTable, row: IndexRow): void {
    let parameters = this.byParameter.get(table);
    if (!parameters) {
      parameters = new Map();
      this.byParameter.set(table, parameters);
    }
    const seen = parameters.get(row[0]);
    if (seen === undefined) {
      this.keep(table, row);
      parameters.set(row[0], [row]);
    } else if (Array.isArray(seen)) {
      if (seen.some((other) => sameRow(other, row))) return;
      this.keep(table, row);
      seen.push(row);
      if (seen.length > FEW_ROWS) parameters.set(row[0], new Set(seen.map(rowKey)));
    } else {
      const key = rowKey(row);
      if (seen.has(key)) return;
      this.keep(table, row);
      seen.add(key);
    }
  }

  get size(): number {
    return this.count;
  }

  private keep(table: IndexTable, row: IndexRow): void {
    if (this.count >= this.limit) throw new RowLimitExceeded();
    this.count++;
    let list = this.rows.get(table);
    if (!list) {
      list = [];
      this.rows.set(table, list);
    }
    list.push(row);
  }
}

function sameRow(a: IndexRow, b: IndexRow): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Equal for exactly the rows `sameRow` finds equal (a NULL is not an empty text, a number not a text). */
const rowKey = (row: IndexRow): string => JSON.stringify(row);

/** System of the extra quantity rows that hold the UCUM canonical form (unit code in base units). */
export const CANONICAL_SYSTEM = 'urn:ambient-fhir:ucum-canonical';
