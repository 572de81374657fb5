// The index tables (created by storage/migrations/003-search-indexes.ts; docs/search.md has a worked
// example). Every row carries the resource's `pk`, the search parameter's `sp` id (a hash of
// `ResourceType.code`, see catalog.ts) and `grp`, the element instance a composite's components came
// from (0 for ordinary rows). The column lists here must match the migration.
import type { SqlValue } from '../storage/sql/database.js';

export type IndexTable =
  'idx_string' | 'idx_token' | 'idx_date' | 'idx_number' | 'idx_quantity' | 'idx_reference' | 'idx_uri';

export interface TableShape {
  /** Value columns after (pk, sp, grp). */
  readonly columns: readonly string[];
  /** PostgreSQL array types of (pk, sp, grp, ...columns), for the one-statement `unnest` insert. */
  readonly pgTypes: readonly string[];
}

const KEY_TYPES = ['bigint', 'bigint', 'int'];

export const INDEX_TABLES: Record<IndexTable, TableShape> = {
  idx_string: { columns: ['norm', 'exact'], pgTypes: [...KEY_TYPES, 'text', 'text'] },
  idx_token: { columns: ['system', 'code', 'text'], pgTypes: [...KEY_TYPES, 'text', 'text', 'text'] },
  idx_date: { columns: ['lo', 'hi'], pgTypes: [...KEY_TYPES, 'bigint', 'bigint'] },
  idx_number: { columns: ['lo', 'hi'], pgTypes: [...KEY_TYPES, 'float8', 'float8'] },
  idx_quantity: {
    columns: ['system', 'code', 'lo', 'hi'],
    pgTypes: [...KEY_TYPES, 'text', 'text', 'float8', 'float8'],
  },
  idx_reference: { columns: ['target_type', 'target_id'], pgTypes: [...KEY_TYPES, 'text', 'text'] },
  idx_uri: { columns: ['uri'], pgTypes: [...KEY_TYPES, 'text'] },
};

export const TABLE_NAMES = Object.keys(INDEX_TABLES) as IndexTable[];

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
