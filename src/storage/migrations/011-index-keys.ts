import { fullColumn, INDEX_KEY_LENGTH, INDEX_TABLES, TABLE_NAMES } from '../../search/tables.js';
import type { Migration } from './migration.js';

// Long values in the index tables (search/tables.ts, INDEX_KEY_LENGTH; docs/search.md, "Long values"):
// each indexed text column holds at most a key of INDEX_KEY_LENGTH code points, and `<column>_full` the
// whole value when it is longer (NULL otherwise), so that no value of an R4 resource makes an index
// entry PostgreSQL refuses. Rows stored before this migration with longer values (SQLite took them;
// PostgreSQL only compressible ones) are re-keyed here: SQL's length and substr count code points on
// both databases, as indexKey does. `reindex` writes the same rows from the resources.
export const indexKeysMigration: Migration = {
  version: 11,
  name: 'index-keys',
  statements: (d) =>
    TABLE_NAMES.flatMap((table) => {
      const keyed = INDEX_TABLES[table].keyed;
      if (keyed.length === 0) return [];
      // idx_reference's columns take the database collation (003-search-indexes.ts); the others compare bytes.
      const type = table === 'idx_reference' ? 'TEXT' : d.binaryText;
      const long = (column: string) => `length(${column}) > ${INDEX_KEY_LENGTH}`;
      // One pass per table: every right-hand side reads the row as it was before the UPDATE.
      const assignments = keyed.flatMap((column) => [
        `${fullColumn(column)} = CASE WHEN ${long(column)} THEN ${column} END`,
        `${column} = CASE WHEN ${long(column)} THEN substr(${column}, 1, ${INDEX_KEY_LENGTH}) ELSE ${column} END`,
      ]);
      return [
        ...keyed.map((column) => `ALTER TABLE ${table} ADD COLUMN ${fullColumn(column)} ${type}`),
        `UPDATE ${table} SET ${assignments.join(', ')} WHERE ${keyed.map(long).join(' OR ')}`,
      ];
    }),
};
