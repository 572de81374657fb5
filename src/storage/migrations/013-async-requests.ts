import type { Migration } from './migration.js';

// Asynchronous requests (https://hl7.org/fhir/R4/async.html, docs/fhir.md): a search sent with `Prefer:
// respond-async` is a job of the export machinery (export_job with its leases, the runner, the output
// store), of kind 'request'; exports are kind 'export'. Each kind has its own bound on an account's
// unfinished jobs, and its own workers, so that a long export never holds up a search.
export const asyncRequestsMigration: Migration = {
  version: 13,
  name: 'async-requests',
  statements: () => [
    `ALTER TABLE export_job ADD COLUMN kind TEXT NOT NULL DEFAULT 'export'`,
    `CREATE INDEX export_job_kind_claim ON export_job (kind, state, lease_expires, created_at)`,
    // Every claim names its kind now: the index without it would only cost writes.
    `DROP INDEX export_job_claim`,
  ],
};
