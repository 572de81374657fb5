// The bound on SQLite's prepared statements, per connection (the writer, the reader, each search
// worker): a byte budget, so that searches with long, distinct SQL texts (a different number of OR'd
// values each) cannot hold memory without end, while the texts requests repeat stay prepared.
import { ByteLru } from '../sql/byte-lru.js';
import type { ByteLruLimits } from '../sql/byte-lru.js';

export const STATEMENT_CACHE_LIMITS: ByteLruLimits = { maxBytes: 8 * 1024 * 1024, maxEntries: 500 };

/**
 * What SQLite holds for one prepared statement, estimated from its text: measured at 15-21 bytes of
 * RSS per byte of text (search statements with 10 to 100 OR'd values), plus the statement's own
 * structures.
 */
export function preparedStatementBytes(sql: string): number {
  return 20 * sql.length + 2048;
}

/** Prepared statements by SQL text, least recently used first out. */
export function statementCache<V>(): ByteLru<V> {
  return new ByteLru<V>(STATEMENT_CACHE_LIMITS);
}
