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

/**
 * Collects the index rows of one resource, without duplicates, up to `limit` rows: past it `add` throws
 * at once, so a resource over the limit costs no more to refuse than one at the limit costs to index.
 */
export class RowSink {
  readonly rows = new Map<IndexTable, IndexRow[]>();
  private readonly seen = new Set<string>();

  constructor(private readonly limit = Number.POSITIVE_INFINITY) {}

  add(table: IndexTable, row: IndexRow): void {
    const key = `${table}\u0001${row.join('\u0001')}`;
    if (this.seen.has(key)) return;
    if (this.seen.size >= this.limit) throw new RowLimitExceeded();
    this.seen.add(key);
    let list = this.rows.get(table);
    if (!list) {
      list = [];
      this.rows.set(table, list);
    }
    list.push(row);
  }

  get size(): number {
    return this.seen.size;
  }
}

/** System of the extra quantity rows that hold the UCUM canonical form (unit code in base units). */
export const CANONICAL_SYSTEM = 'urn:ambient-fhir:ucum-canonical';
