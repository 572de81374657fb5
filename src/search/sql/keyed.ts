// Conditions on keyed columns (tables.ts, INDEX_KEY_LENGTH): the index holds a value's first 256 code
// points, and `<column>_full` the whole value when it is longer. Each condition compares the key
// through the index and, only where the key cannot decide, the whole value: searches for values
// shorter than a key keep the SQL they always had, and a search for a long value stays an index probe
// with a recheck of the few rows sharing its key. Every condition is over alias `t`.
import { fullColumn, indexKey, keyFit } from '../tables.js';
import { escapeLike, prefixUpperBound } from '../values/text.js';
import { and, list, or, raw, sql } from './fragment.js';
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

/** The stored value is one of `values` (an IN list for the short ones). */
export function keyIn(column: string, values: readonly string[]): Sql {
  const short = values.filter((value) => keyFit(value) === 'short');
  const others = values.filter((value) => keyFit(value) !== 'short');
  const conditions = others.map((value) => keyEquals(column, value));
  if (short.length === 1) conditions.unshift(sql`${key(column)} = ${short[0]}`);
  else if (short.length > 1) conditions.unshift(sql`${key(column)} IN ${list(short)}`);
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
