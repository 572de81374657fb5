// resource_link rows: bounded per resource like the index rows, and written in statements that stay under
// each backend's limit on bound parameters (the database tests write them for real).
import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { MAX_INDEX_ROWS_PER_RESOURCE } from './index-limits.js';
import { ReferenceParser } from '../fhir/references.js';
import { LinkWriter } from './link-writer.js';
import type { SqlValue } from './sql/database.js';
import { postgresDialect, sqliteDialect, type Dialect } from './sql/dialect.js';
import type { SqlExecutor } from './sql/database.js';

function recordingExecutor(dialect: Dialect) {
  const statements: { sql: string; params: readonly SqlValue[] }[] = [];
  const tx: SqlExecutor = {
    dialect,
    query: async () => [],
    execute: async (sql, params = []) => {
      statements.push({ sql, params });
      return 0;
    },
  };
  return { tx, statements };
}

const withReferences = (count: number) => ({
  resourceType: 'Group',
  member: Array.from({ length: count }, (_, i) => ({ entity: { reference: `Patient/p${i}` } })),
});

describe('LinkWriter', () => {
  const writer = new LinkWriter(new ReferenceParser('https://fhir.example/fhir', (t) => /^[A-Z]/.test(t)));

  it('writes 30,000 links in one fixed statement on PostgreSQL and in INSERTs of 64 rows on SQLite', async () => {
    // An update: the resource's old links go first, then its new ones.
    const removed = { sql: 'DELETE FROM resource_link WHERE source_pk = ?', params: [7] };
    const postgres = recordingExecutor(postgresDialect);
    await writer.write(postgres.tx, 7, 'Group', withReferences(30_000));
    const [postgresDelete, ...postgresInserts] = postgres.statements;
    expect(postgresDelete).toEqual(removed);
    expect(postgresInserts).toHaveLength(1);
    expect(postgresInserts[0].params).toHaveLength(3);
    // One array literal per column: 30,000 target ids.
    expect((postgresInserts[0].params[2] as string).slice(1, -1).split(',')).toHaveLength(30_000);

    const sqlite = recordingExecutor(sqliteDialect);
    await writer.write(sqlite.tx, 7, 'Group', withReferences(30_000));
    const [sqliteDelete, ...sqliteInserts] = sqlite.statements;
    expect(sqliteDelete).toEqual(removed);
    expect(sqliteInserts).toHaveLength(Math.ceil(30_000 / 64));
    expect(Math.max(...sqliteInserts.map((s) => s.params.length))).toBe(64 * 3);
    expect(sqliteInserts.reduce((n, s) => n + s.params.length, 0)).toBe(90_000);
  });

  it('refuses a resource with more distinct local references than the limit, before writing any', async () => {
    const { tx, statements } = recordingExecutor(sqliteDialect);
    const refused = writer.write(tx, 7, 'Group', withReferences(MAX_INDEX_ROWS_PER_RESOURCE + 1));
    await expect(refused).rejects.toBeInstanceOf(AppError);
    await expect(refused).rejects.toMatchObject({ code: 'too-many-index-rows', status: 422 });
    expect(statements).toEqual([]);
    // So are the rows of a new resource, asked for before its one-statement create.
    expect(() => writer.newRows('Group', withReferences(MAX_INDEX_ROWS_PER_RESOURCE + 1))).toThrow(
      expect.objectContaining({ code: 'too-many-index-rows', status: 422 }),
    );
    expect(writer.newRows('Group', withReferences(2))).toEqual([
      {
        table: 'resource_link',
        pkColumn: 'source_pk',
        columns: ['target_type', 'target_id'],
        pgTypes: ['text', 'text'],
        rows: [
          ['Patient', 'p0'],
          ['Patient', 'p1'],
        ],
      },
    ]);
  });
});
