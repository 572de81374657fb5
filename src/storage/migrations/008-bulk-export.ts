import type { Migration } from './migration.js';

// Bulk Data export (issue 12 §2, docs/export.md): jobs and their output both live in the database, so that
// any server process on it can answer status and file requests and a restarted process resumes a job.
// Like the scribe tables, times are epoch milliseconds and JSON is TEXT, so every statement is the same
// on SQLite and PostgreSQL.
// - export_job: one row per kick-off. state: queued, running (leased until lease_expires by the holder
//   of lease_token, kept by a heartbeat), completed, failed. `progress` is where the walk stands (type,
//   last pk written, files so far): a resumed job continues from there. `expires_at` is set when the job
//   ends (completed_at + AMBIENT_EXPORT_TTL_SECONDS); the sweep removes the job and its output after it.
// - export_chunk: the NDJSON output, a file at a time in chunks of about 1 MiB (whole lines), so that a
//   download streams one chunk after the other and a job never holds more than a chunk in memory.
export const bulkExportMigration: Migration = {
  version: 8,
  name: 'bulk-export',
  statements: (d) => [
    `CREATE TABLE export_job (
      id TEXT PRIMARY KEY,
      account_id TEXT NOT NULL,
      request TEXT NOT NULL,
      params TEXT NOT NULL,
      state TEXT NOT NULL,
      transaction_time ${d.bigint} NOT NULL,
      progress TEXT,
      output TEXT,
      error TEXT,
      attempts INTEGER NOT NULL DEFAULT 0,
      lease_token TEXT,
      lease_expires ${d.bigint},
      created_at ${d.bigint} NOT NULL,
      updated_at ${d.bigint} NOT NULL,
      completed_at ${d.bigint},
      expires_at ${d.bigint}
    )`,
    // An account's unfinished exports (the per-account limit at kick-off).
    `CREATE INDEX export_job_account ON export_job (account_id, state)`,
    // Claiming: queued jobs, and running ones whose lease expired.
    `CREATE INDEX export_job_claim ON export_job (state, lease_expires, created_at)`,
    // The sweep of expired jobs.
    `CREATE INDEX export_job_expires ON export_job (expires_at)`,
    `CREATE TABLE export_chunk (
      job_id TEXT NOT NULL REFERENCES export_job (id),
      type TEXT NOT NULL,
      file_no INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      resources INTEGER NOT NULL,
      data TEXT NOT NULL,
      PRIMARY KEY (job_id, type, file_no, seq)
    )`,
  ],
};
