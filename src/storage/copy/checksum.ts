// The count and checksum of a table's rows, computed from the rows as read from one database, so that
// the copy's two databases can be compared (the `db copy` command). The checksum does not depend on the
// order the rows come in: the two databases order text keys by their own collations (SQLite byte by
// byte, PostgreSQL by the database's locale), and the index tables have no unique key to order by. It is
// the sum of each row's SHA-256, in eight 32-bit lanes each summed modulo 2^32 (an additive multiset
// hash): a row added, lost, repeated or changed on one side changes it.
import { createHash } from 'node:crypto';
import type { Row } from '../sql/database.js';

/**
 * One row as text: each column by name, then its value tagged by kind (so `1` and `'1'` differ) and, for
 * texts, prefixed by its length (so no value can pass for a column boundary). Nothing is escaped: the
 * contents, most of the bytes, are only concatenated.
 */
export function canonicalRow(row: Row): string {
  let text = '';
  for (const name of Object.keys(row).sort()) {
    const value = row[name];
    text += `${name}=`;
    if (value === null || value === undefined) text += 'z;';
    else if (typeof value === 'string') text += `s${value.length}:${value};`;
    else if (typeof value === 'number' || typeof value === 'bigint') text += `n${String(value)};`;
    else if (Buffer.isBuffer(value)) text += `b${value.length}:${value.toString('base64')};`;
    else text += `j${JSON.stringify(value)};`;
  }
  return text;
}

export class TableSum {
  rows = 0;
  /** Eight 32-bit lanes: each sum stays a small integer, wrapped modulo 2^32 by the typed array. */
  private readonly lanes = new Uint32Array(8);

  add(row: Row): void {
    const digest = createHash('sha256').update(canonicalRow(row)).digest();
    for (let lane = 0; lane < 8; lane++) this.lanes[lane] += digest.readUInt32BE(lane * 4);
    this.rows++;
  }

  /** The checksum as 64 hexadecimal digits. */
  get checksum(): string {
    return [...this.lanes].map((lane) => lane.toString(16).padStart(8, '0')).join('');
  }
}
