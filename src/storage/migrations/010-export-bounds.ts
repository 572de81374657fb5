import type { Migration } from './migration.js';

// Bounded exports (docs/export.md, "Space"): each job counts the stored bytes of its output (`bytes`, the
// per-account bound AMBIENT_EXPORT_MAX_BYTES_PER_ACCOUNT) and keeps the catalog code of its failure
// (`error_code`: an export stopped at the bound is the client's 422, not a server error). The output is
// now gzip (export/gzip-file.ts): on PostgreSQL in export_chunk as bytes; on SQLite in files beside the
// database, so that its space goes back to the file system when an export goes. Output of the earlier
// text format cannot be served as gzip: exports made before this migration are removed (they are kept a
// day at most; their clients get 404 and kick off again).
export const exportBoundsMigration: Migration = {
  version: 10,
  name: 'export-bounds',
  statements: (d) => [
    `DROP TABLE export_chunk`,
    `DELETE FROM export_job`,
    `ALTER TABLE export_job ADD COLUMN bytes ${d.bigint} NOT NULL DEFAULT 0`,
    `ALTER TABLE export_job ADD COLUMN error_code TEXT`,
    `CREATE TABLE export_chunk (
      job_id TEXT NOT NULL REFERENCES export_job (id),
      type TEXT NOT NULL,
      file_no INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      data ${d.blob} NOT NULL,
      PRIMARY KEY (job_id, type, file_no, seq)
    )`,
  ],
};
