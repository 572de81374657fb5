import type { Migration } from './migration.js';

// The resource tables: see docs/storage.md for the design and a worked example.
export const resourcesMigration: Migration = {
  version: 1,
  name: 'resources',
  statements: (d) => [
    `CREATE TABLE resource (
      pk ${d.autoIncrementPrimaryKey},
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      version INTEGER NOT NULL,
      last_updated ${d.bigint} NOT NULL,
      deleted SMALLINT NOT NULL DEFAULT 0,
      content TEXT,
      CONSTRAINT resource_type_id UNIQUE (type, id)
    )`,
    `CREATE INDEX resource_type_pk ON resource (type, pk)`,
    `CREATE TABLE resource_history (
      seq ${d.autoIncrementPrimaryKey},
      pk ${d.bigint} NOT NULL REFERENCES resource (pk),
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      version INTEGER NOT NULL,
      last_updated ${d.bigint} NOT NULL,
      operation TEXT NOT NULL,
      content TEXT,
      CONSTRAINT resource_history_version UNIQUE (pk, version)
    )`,
    `CREATE INDEX resource_history_type_time ON resource_history (type, last_updated, seq)`,
    `CREATE INDEX resource_history_time ON resource_history (last_updated, seq)`,
  ],
};
