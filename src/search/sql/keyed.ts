// Conditions on keyed columns (tables.ts, INDEX_KEY_LENGTH): the index holds a value's first 256 code
// points, and `<column>_full` the whole value when it is longer. Each condition compares the key
// through the index and, only where the key cannot decide, the whole value: searches for values
// shorter than a key keep the SQL they always had, and a search for a long value stays an index probe
// with a recheck of the few rows sharing its key. Every condition is over alias `t`.
import { fullColumn, indexKey, keyFit } from '../tables.js';
import { escapeLike, prefixUpperBound } from '../values/text.js';
import type { Dialect } from '../../storage/sql/dialect.js';
import { and, equalsAny, or, raw, sql } from './fragment.js';
import type { Sql } from './fragment.js';

const key = (column: string): Sql => raw(`t.${column}`);
const full = (column: string): Sql => raw(`t.${fullColumn(column)}`);

/** The stored value is `value`, whole. */
export function keyEquals(column: string, value: string): Sql {
  const fit = keyFit(value);
  if (fit === 'short') return sql`${key(column)} = ${value}`;
  // A key as long as `value` may be the key of a longer value: only a row without a full value is it.
  if (fit === 'full') return and([sql`${key(column)} = ${value}`, sql`${full(column)} IS NULL`]);
  return and([sql`${key(column)} = ${indexKey(value)}`, sql`${full(column)} = ${value}`]);
}

/**
 * The row's `columns` (over alias `t`) hold one of `rows` (a value per column, whole), every column
 * keyed but those in `plain`. One value list (fragment.ts equalsAny: one bound parameter, whatever its
 * length) for the rows whose keyed values are shorter than a key, which are their keys; for the others
 * (rare) a list of their keys, the index search, and a list of their whole values to recheck. The
 * statement text so depends on which of the two kinds a search has, never on how many.
 */
export function keyIn(
  d: Dialect,
  columns: readonly string[],
  rows: readonly (readonly string[])[],
  plain: readonly string[] = [],
): Sql {
  const keyed = columns.map((column) => !plain.includes(column));
  if (rows.length === 1) {
    return and(
      rows[0].map((value, i) => (keyed[i] ? keyEquals(columns[i], value) : sql`${key(columns[i])} = ${value}`)),
    );
  }
  const isShort = (row: readonly string[]) => row.every((value, i) => !keyed[i] || keyFit(value) === 'short');
  const short = rows.filter(isShort);
  const others = rows.filter((row) => !isShort(row));
  const keys = columns.map((column) => `t.${column}`);
  const conditions: Sql[] = [];
  if (short.length > 0) conditions.push(equalsAny(d, keys, short));
  if (others.length > 0) {
    // A whole value is its key when the full column is NULL (a value of exactly a key's length too).
    const wholes = columns.map((column, i) =>
      keyed[i] ? `COALESCE(t.${fullColumn(column)}, t.${column})` : `t.${column}`,
    );
    const otherKeys = others.map((row) => row.map((value, i) => (keyed[i] ? indexKey(value) : value)));
    conditions.push(and([equalsAny(d, keys, otherKeys), equalsAny(d, wholes, others)]));
  }
  return or(conditions);
}

/** The stored value starts with `prefix`: an index range on the key, and on the whole value past it. */
export function keyStartsWith(column: string, prefix: string): Sql {
  // A prefix no longer than a key starts the key exactly when it starts the value.
  if (keyFit(prefix) !== 'long') return startsWith(key(column), prefix);
  // Longer: the key must be the prefix's key, and the value (so longer than a key) start with it.
  return and([sql`${key(column)} = ${indexKey(prefix)}`, startsWith(full(column), prefix)]);
}

/** The whole stored value, for conditions no index serves (`:contains`). */
export function wholeValue(column: string): Sql {
  return sql`COALESCE(${full(column)}, ${key(column)})`;
}

/**
 * Completes a sort on keyed columns: rows whose keys tie are ordered by their whole values ('' for a
 * value that is its key, which sorts before every longer value with that key).
 */
export function keyTiebreak(column: string): Sql {
  return sql`COALESCE(${full(column)}, '')`;
}

/** `expression` starts with `prefix` (binary collation: an index range when there is an upper bound). */
function startsWith(expression: Sql, prefix: string): Sql {
  const upper = prefixUpperBound(prefix);
  return upper === undefined
    ? sql`${expression} LIKE ${`${escapeLike(prefix)}%`} ESCAPE '\\'`
    : and([sql`${expression} >= ${prefix}`, sql`${expression} < ${upper}`]);
}
