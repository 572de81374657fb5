// The page cursors of every paged list (search, history, the scribe records list; docs/api.md): opaque
// tokens that hold a position in the list, signed with HMAC-SHA256 over themselves and the name of the
// list they page, so that they can be neither altered, forged nor replayed on another list. The key
// lives in the database (table search_key, created by migration 003), so every server process can
// read every other's links, across releases.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SqlExecutor, SqlValue } from './storage/sql/database.js';

const MAC_BYTES = 16;

function mac(key: string, payload: string, list: string): Buffer {
  return createHmac('sha256', key).update(payload).update('\u0000').update(list).digest().subarray(0, MAC_BYTES);
}

/**
 * A cursor holding `values` on the list named `list`. Names of different kinds of list must differ
 * (search binds its cursors to a JSON array, history and the scribe list to a prefixed name), so that
 * no cursor of one opens on another.
 */
export function signCursor(key: string, values: readonly SqlValue[], list: string): string {
  const payload = Buffer.from(JSON.stringify(values)).toString('base64url');
  return `${payload}.${mac(key, payload, list).toString('base64url')}`;
}

/**
 * The values of a cursor that `signCursor` made for `list` with `key`; undefined for anything else
 * (altered, forged, truncated, of another list), which each list answers with its own 400.
 */
export function openCursor(key: string, token: string, list: string): unknown[] | undefined {
  const [payload, signature, extra] = token.split('.');
  if (!payload || !signature || extra !== undefined) return undefined;
  const expected = mac(key, payload, list);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    const values: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString());
    return Array.isArray(values) ? values : undefined;
  } catch {
    return undefined;
  }
}

/** The cursors' key of one database, read once and kept (read again after a failed read). */
export class CursorKey {
  private key: Promise<string> | undefined;

  constructor(private readonly db: SqlExecutor) {}

  /**
   * Reads through `executor` when given: a search inside a transaction passes its own connection, so
   * that it never waits for another connection while holding one.
   */
  read(executor: SqlExecutor = this.db): Promise<string> {
    if (this.key) return this.key;
    const key = executor.query<{ secret: string }>('SELECT secret FROM search_key WHERE id = 1').then(([row]) => {
      if (!row) throw new Error('search_key has no row: run the migrations');
      return row.secret;
    });
    this.key = key;
    key.catch(() => {
      if (this.key === key) this.key = undefined;
    });
    return key;
  }
}
