import type { Migration } from './migration.js';

// Read-your-writes on PostgreSQL replicas (DATABASE_READ_URLS, storage/write-positions.ts): the WAL
// position after each account's latest write, so that any server process can tell whether a replica
// has replayed it before sending that account's search there. Written only when replicas are used.
export const writePositionsMigration: Migration = {
  version: 9,
  name: 'write-positions',
  statements: () => [
    `CREATE TABLE account_write_position (
      account_id TEXT PRIMARY KEY,
      position TEXT NOT NULL
    )`,
  ],
};
