// Paging cursors (docs/api.md: keyset paging, opaque and tamper-proof page tokens). A cursor holds the
// keyset position (the sort values and pk of the row next to the page boundary) and the direction,
// and is signed with HMAC-SHA256 over itself and the normalised query, so it can be neither altered
// nor replayed on another query. The key lives in the database (table search_key, created by
// migration 003), so every server process can read every other's links.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors.js';
import type { SqlValue } from '../storage/sql/database.js';

export interface CursorPosition {
  /** [...sort values, pk] of the boundary row. */
  readonly position: readonly SqlValue[];
  /** true: the page before the position (a `previous` link). */
  readonly backwards: boolean;
}

const MAC_BYTES = 16;

function mac(secret: string, payload: string, queryKey: string): Buffer {
  return createHmac('sha256', secret).update(payload).update('\u0000').update(queryKey).digest().subarray(0, MAC_BYTES);
}

export function encodeCursor(secret: string, cursor: CursorPosition, queryKey: string): string {
  const payload = Buffer.from(JSON.stringify([cursor.backwards ? 1 : 0, ...cursor.position])).toString('base64url');
  return `${payload}.${mac(secret, payload, queryKey).toString('base64url')}`;
}

export function decodeCursor(secret: string, token: string, queryKey: string): CursorPosition {
  const invalidCursor = (): AppError =>
    new AppError('invalid-search', '_cursor is not a page link this server issued for this search', {
      expression: '_cursor',
    });
  const [payload, signature, extra] = token.split('.');
  if (!payload || !signature || extra !== undefined) throw invalidCursor();
  const expected = mac(secret, payload, queryKey);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalidCursor();
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(payload, 'base64url').toString());
  } catch {
    throw invalidCursor();
  }
  if (!Array.isArray(values) || values.length < 2) throw invalidCursor();
  const [direction, ...position] = values as SqlValue[];
  return { backwards: direction === 1, position };
}
