import { randomBytes } from 'node:crypto';
import type { Migration } from './migration.js';

// The search index tables: see docs/search.md for the design, a worked example and the query plans.
// Each table: (pk, sp, grp, values...) with one index led by sp (search by value) and one by pk
// (probe a candidate, delete on update). `sp` is the parameter id (search/catalog.ts).
export const searchIndexesMigration: Migration = {
  version: 3,
  name: 'search-indexes',
  statements: (d) => {
    const key = `pk ${d.bigint} NOT NULL, sp ${d.bigint} NOT NULL, grp INTEGER NOT NULL DEFAULT 0`;
    const text = `${d.binaryText} NOT NULL`;
    const table = (name: string, columns: string, valueIndex: string): string[] => [
      `CREATE TABLE ${name} (${key}, ${columns})`,
      `CREATE INDEX ${name}_value ON ${name} (${valueIndex})`,
      `CREATE INDEX ${name}_pk ON ${name} (pk, sp)`,
    ];
    return [
      ...table('idx_string', `norm ${text}, exact ${text}`, 'sp, norm, pk'),
      ...table('idx_token', `system ${text}, code ${text}, text ${d.binaryText}`, 'sp, code, system, pk'),
      ...table('idx_date', `lo ${d.bigint} NOT NULL, hi ${d.bigint} NOT NULL`, 'sp, lo, hi, pk'),
      ...table('idx_number', `lo ${d.double} NOT NULL, hi ${d.double} NOT NULL`, 'sp, lo, hi, pk'),
      ...table(
        'idx_quantity',
        `system ${text}, code ${text}, lo ${d.double} NOT NULL, hi ${d.double} NOT NULL`,
        'sp, code, system, lo, pk',
      ),
      // Plain TEXT (the database collation, like resource.type and resource.id): chains and includes
      // compare these with the resource table's (type, id), and PostgreSQL uses an index only when the
      // collations agree.
      ...table('idx_reference', 'target_type TEXT NOT NULL, target_id TEXT NOT NULL', 'sp, target_id, target_type, pk'),
      ...table('idx_uri', `uri ${text}`, 'sp, uri, pk'),
      // _lastUpdated searches and sorts, per type.
      `CREATE INDEX resource_type_updated ON resource (type, last_updated, pk)`,
      // The HMAC key of paging cursors: one per database, so every server process can read any page link.
      `CREATE TABLE search_key (id INTEGER PRIMARY KEY, secret TEXT NOT NULL)`,
      `INSERT INTO search_key (id, secret) VALUES (1, '${randomBytes(32).toString('hex')}')`,
    ];
  },
};
