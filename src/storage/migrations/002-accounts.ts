import type { Migration } from './migration.js';

// Service accounts, the JWT signing keys and the auth state counter: see docs/auth.md.
// Booleans are SMALLINT 0/1 and times are ISO-8601 text (or epoch seconds where they are compared with
// JWT claims), so every statement is the same on SQLite and PostgreSQL.
export const accountsMigration: Migration = {
  version: 2,
  name: 'accounts',
  statements: (d) => [
    `CREATE TABLE account (
      id TEXT PRIMARY KEY,
      username TEXT NOT NULL,
      password_hash TEXT NOT NULL,
      active SMALLINT NOT NULL DEFAULT 1,
      api_access SMALLINT NOT NULL DEFAULT 1,
      scopes TEXT NOT NULL,
      rate_limit INTEGER,
      tokens_not_before ${d.bigint} NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      CONSTRAINT account_username UNIQUE (username)
    )`,
    `CREATE TABLE signing_key (
      kid TEXT PRIMARY KEY,
      algorithm TEXT NOT NULL,
      private_jwk TEXT NOT NULL,
      public_jwk TEXT NOT NULL,
      created_at TEXT NOT NULL
    )`,
    // One row; its version is bumped in the same transaction as every change to an account or a key,
    // so each server process can tell with one cheap read whether its caches are still current.
    `CREATE TABLE auth_state (
      id SMALLINT PRIMARY KEY,
      version ${d.bigint} NOT NULL
    )`,
    `INSERT INTO auth_state (id, version) VALUES (1, 0)`,
  ],
};
