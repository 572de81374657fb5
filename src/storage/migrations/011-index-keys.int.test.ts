// Migration 011 re-keys index rows stored before it (SQLite took values of any length; PostgreSQL took
// long ones when they compressed under its B-tree limit) exactly as the write path now keys them
// (search/tables.ts storedRow): SQL's length and substr count code points as indexKey does, on both
// databases, so rows stored earlier are found by the same conditions as rows written now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, testDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { INDEX_KEY_LENGTH, storedRow } from '../../search/tables.js';
import { migrate } from '../migrate.js';
import { openDatabase } from '../open-database.js';
import type { SqlDatabase } from '../sql/database.js';
import { MIGRATIONS } from './index.js';

// Repetitive (so PostgreSQL compresses them into a B-tree entry before this migration) and made of
// one-, three- and four-byte characters, so that counting bytes or UTF-16 units would cut elsewhere.
const LONG_NORM = 'a中😀'.repeat(1_000);
const LONG_SYSTEM = 'urn:x:' + 'ж'.repeat(3_000);
const LONG_URL = 'https://other.example/' + 'b😀'.repeat(2_000);
const AT_KEY = 'c'.repeat(INDEX_KEY_LENGTH);

describe.each(BACKENDS)('migration 011-index-keys on %s', (backend) => {
  let testDb: TestDatabase;
  let db: SqlDatabase;

  beforeAll(async () => {
    testDb = await testDatabase(backend);
    db = openDatabase(testDb.url);
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 11),
    );
    const rows: [string, string, unknown[]][] = [
      ['idx_string', '(pk, sp, grp, norm, exact)', [1, 10, 0, LONG_NORM, LONG_NORM.toUpperCase()]],
      ['idx_string', '(pk, sp, grp, norm, exact)', [2, 10, 0, AT_KEY, AT_KEY]],
      ['idx_token', '(pk, sp, grp, system, code, text)', [1, 11, 0, LONG_SYSTEM, 'short', null]],
      ['idx_token', '(pk, sp, grp, system, code, text)', [2, 11, 0, 'urn:s', LONG_NORM, 'x']],
      ['idx_quantity', '(pk, sp, grp, system, code, lo, hi)', [1, 12, 0, LONG_SYSTEM, LONG_NORM, 1, 2]],
      ['idx_reference', '(pk, sp, grp, target_type, target_id)', [1, 13, 0, '', LONG_URL]],
      ['idx_reference', '(pk, sp, grp, target_type, target_id)', [2, 13, 0, 'Patient', 'p1']],
      ['idx_uri', '(pk, sp, grp, uri)', [1, 14, 0, LONG_URL]],
    ];
    for (const [table, columns, values] of rows) {
      await db.execute(
        `INSERT INTO ${table} ${columns} VALUES (${values.map(() => '?').join(', ')})`,
        values as never[],
      );
    }
    expect(await migrate(db)).toContain(11);
  });

  afterAll(async () => {
    await db?.close();
    await testDb?.dispose();
  });

  /** The rows of `table` as storedRow writes them: [sp, grp, ...columns, ...full columns], by pk. */
  const rowsOf = async (table: string, columns: string) =>
    (await db.query<Record<string, unknown>>(`SELECT ${columns} FROM ${table} ORDER BY pk`)).map((row) =>
      Object.values(row).map((v) => (typeof v === 'string' || v === null ? v : Number(v))),
    );

  it('keeps the key in the indexed column and the whole value beside it, as the write path does', async () => {
    expect(await rowsOf('idx_string', 'sp, grp, norm, exact, norm_full')).toEqual([
      storedRow('idx_string', [10, 0, LONG_NORM, LONG_NORM.toUpperCase()]),
      storedRow('idx_string', [10, 0, AT_KEY, AT_KEY]),
    ]);
    expect(await rowsOf('idx_token', 'sp, grp, system, code, text, system_full, code_full')).toEqual([
      storedRow('idx_token', [11, 0, LONG_SYSTEM, 'short', null]),
      storedRow('idx_token', [11, 0, 'urn:s', LONG_NORM, 'x']),
    ]);
    expect(await rowsOf('idx_quantity', 'sp, grp, system, code, lo, hi, system_full, code_full')).toEqual([
      storedRow('idx_quantity', [12, 0, LONG_SYSTEM, LONG_NORM, 1, 2]),
    ]);
    expect(await rowsOf('idx_reference', 'sp, grp, target_type, target_id, target_id_full')).toEqual([
      storedRow('idx_reference', [13, 0, '', LONG_URL]),
      storedRow('idx_reference', [13, 0, 'Patient', 'p1']),
    ]);
    expect(await rowsOf('idx_uri', 'sp, grp, uri, uri_full')).toEqual([storedRow('idx_uri', [14, 0, LONG_URL])]);
    // And the keys are what they should be: 256 code points of the value, the value whole beside them.
    const [stringRow] = await rowsOf('idx_string', 'norm, norm_full');
    expect(stringRow).toEqual([[...LONG_NORM].slice(0, INDEX_KEY_LENGTH).join(''), LONG_NORM]);
  });
});
