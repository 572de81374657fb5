import type { Migration } from './migration.js';

// Every local reference of every current resource (source → target type/id), whatever element holds
// it: the opt-in referential integrity (AMBIENT_REFERENTIAL_INTEGRITY) checks writes and deletes here.
export const resourceLinksMigration: Migration = {
  version: 5,
  name: 'resource-links',
  statements: (d) => [
    `CREATE TABLE resource_link (source_pk ${d.bigint} NOT NULL, target_type TEXT NOT NULL, target_id TEXT NOT NULL)`,
    `CREATE INDEX resource_link_source ON resource_link (source_pk)`,
    `CREATE INDEX resource_link_target ON resource_link (target_type, target_id)`,
  ],
};
