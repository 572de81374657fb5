// Search paging cursors (docs/api.md: keyset paging): the keyset position (the sort values and pk of
// the row next to the page boundary) and the direction, signed by page-cursor.ts and bound to the
// normalised query (execute.ts queryKey). Their format is the one they had before the codec was shared,
// so links issued by earlier releases still open.
import { AppError } from '../errors.js';
import { openCursor, signCursor } from '../page-cursor.js';
import type { SqlValue } from '../storage/sql/database.js';

export interface CursorPosition {
  /** [...sort values, pk] of the boundary row. */
  readonly position: readonly SqlValue[];
  /** true: the page before the position (a `previous` link). */
  readonly backwards: boolean;
}

export function encodeCursor(secret: string, cursor: CursorPosition, queryKey: string): string {
  return signCursor(secret, [cursor.backwards ? 1 : 0, ...cursor.position], queryKey);
}

export function decodeCursor(secret: string, token: string, queryKey: string): CursorPosition {
  const values = openCursor(secret, token, queryKey);
  if (!values || values.length < 2) {
    throw new AppError('invalid-search', '_cursor is not a page link this server issued for this search', {
      expression: '_cursor',
    });
  }
  // Signed by this server: the values are the ones encodeCursor was given.
  const [direction, ...position] = values as SqlValue[];
  return { backwards: direction === 1, position };
}
