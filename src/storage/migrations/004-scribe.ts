import type { Migration } from './migration.js';

// The scribe records API: records, their audio until it is transcribed, the durable job queue and the
// administrators' templates. See docs/scribe.md. Like the accounts tables, booleans are SMALLINT, JSON is
// TEXT, record times are ISO-8601 text and queue times epoch milliseconds, so every statement is the same
// on SQLite and PostgreSQL.
export const scribeMigration: Migration = {
  version: 4,
  name: 'scribe',
  statements: (d) => [
    `CREATE TABLE scribe_record (
      id ${d.autoIncrementPrimaryKey},
      account_id TEXT NOT NULL,
      status TEXT NOT NULL,
      submitted_at TEXT NOT NULL,
      completed_at TEXT,
      patient_name TEXT,
      date_of_service TEXT,
      additional_context TEXT,
      patient TEXT,
      encounter TEXT,
      template_ids TEXT NOT NULL,
      transcripts TEXT NOT NULL,
      notes TEXT,
      error TEXT
    )`,
    // The caller's records, newest first (the list's keyset: account_id = ? AND id < ? ORDER BY id DESC).
    `CREATE INDEX scribe_record_account ON scribe_record (account_id, id)`,
    // Uploaded audio (base64), kept only until the job has transcribed it.
    `CREATE TABLE scribe_audio (
      id ${d.autoIncrementPrimaryKey},
      record_id ${d.bigint} NOT NULL REFERENCES scribe_record (id),
      position INTEGER NOT NULL,
      filename TEXT NOT NULL,
      content_type TEXT NOT NULL,
      data TEXT NOT NULL
    )`,
    `CREATE INDEX scribe_audio_record ON scribe_audio (record_id, position)`,
    // One job per record. state: queued (waiting until run_after), running (leased until lease_expires
    // by the holder of lease_token), done, failed. progress holds what earlier attempts finished.
    `CREATE TABLE scribe_job (
      id ${d.autoIncrementPrimaryKey},
      record_id ${d.bigint} NOT NULL REFERENCES scribe_record (id),
      state TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      run_after ${d.bigint} NOT NULL,
      lease_token TEXT,
      lease_expires ${d.bigint},
      progress TEXT,
      last_error TEXT,
      created_at ${d.bigint} NOT NULL,
      updated_at ${d.bigint} NOT NULL,
      CONSTRAINT scribe_job_record UNIQUE (record_id)
    )`,
    `CREATE INDEX scribe_job_due ON scribe_job (state, run_after)`,
    `CREATE INDEX scribe_job_lease ON scribe_job (state, lease_expires)`,
    // Templates added by administrators (ids from 1000) and their changes to the built-in ones (ids below
    // 1000, which are defined in code: src/scribe/builtin-templates.ts).
    `CREATE TABLE scribe_template (
      id INTEGER PRIMARY KEY,
      definition TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
  ],
};
