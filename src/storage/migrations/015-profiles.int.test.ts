// Migration 015 lists the profiles stored before it, on both databases: a StructureDefinition with a url
// and derivation constraint gets its row (version and type when given); one that is no profile, was
// deleted, or whose content is not JSON the database reads, gets none, and does not stop the migration.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, testDatabase } from '../../../test/support/databases.js';
import type { TestDatabase } from '../../../test/support/databases.js';
import { migrate } from '../migrate.js';
import { openDatabase } from '../open-database.js';
import type { SqlDatabase } from '../sql/database.js';
import { MIGRATIONS } from './index.js';

const sd = (fields: Record<string, unknown>) =>
  JSON.stringify({ resourceType: 'StructureDefinition', kind: 'resource', status: 'active', ...fields });

describe.each(BACKENDS)('migration 015-profiles on %s', (backend) => {
  let testDb: TestDatabase;
  let db: SqlDatabase;

  beforeAll(async () => {
    testDb = await testDatabase(backend);
    db = openDatabase(testDb.url);
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 15),
    );
    const rows: [string, number, string | null][] = [
      ['versioned', 0, sd({ url: 'urn:p:1', version: '2.0', type: 'Patient', derivation: 'constraint' })],
      ['unversioned', 0, sd({ url: 'urn:p:2', type: 'Observation', derivation: 'constraint' })],
      ['specialization', 0, sd({ url: 'urn:p:3', type: 'Basic', derivation: 'specialization' })],
      ['no-url', 0, sd({ type: 'Patient', derivation: 'constraint' })],
      ['deleted', 1, null],
      // A lone surrogate escape: text to SQLite's json_valid, refused by PostgreSQL's jsonb.
      [
        'surrogate',
        0,
        sd({ url: 'urn:p:4', type: 'Patient', derivation: 'constraint', name: 'x' }).replace('"x"', '"\\ud800"'),
      ],
    ];
    for (const [id, deleted, content] of rows) {
      await db.execute(
        'INSERT INTO resource (type, id, version, last_updated, deleted, content) VALUES (?, ?, 1, 0, ?, ?)',
        ['StructureDefinition', id, deleted, content],
      );
    }
    await migrate(db);
  });

  afterAll(async () => {
    await db?.close();
    await testDb?.dispose();
  });

  it('lists each stored profile, and nothing else', async () => {
    const rows = await db.query<{ id: string; url: string; version: string | null; type: string }>(
      'SELECT id, url, version, type FROM profile ORDER BY url',
    );
    const expected = [
      { id: 'versioned', url: 'urn:p:1', version: '2.0', type: 'Patient' },
      { id: 'unversioned', url: 'urn:p:2', version: null, type: 'Observation' },
    ];
    // SQLite reads the surrogate escape as JSON text; PostgreSQL skips that row and goes on.
    if (backend === 'sqlite') expected.push({ id: 'surrogate', url: 'urn:p:4', version: null, type: 'Patient' });
    expect(rows).toEqual(expected);
  });
});
