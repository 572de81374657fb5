import type { Migration } from './migration.js';

// SMART Backend Services (issue 12 §1, see docs/auth.md):
// - account.jwks: the public keys (a JWKS, RS384 and ES384 only) an account signs its client assertions
//   with; NULL when it registered none. The username is the client_id.
// - client_assertion_jti: the `jti` of every client assertion accepted, until its `exp`, so that a replay
//   is refused by every server process on the database (the primary key is the check).
export const clientKeysMigration: Migration = {
  version: 7,
  name: 'client-keys',
  statements: (d) => [
    `ALTER TABLE account ADD COLUMN jwks TEXT`,
    `CREATE TABLE client_assertion_jti (
      client_id TEXT NOT NULL,
      jti TEXT NOT NULL,
      expires_at ${d.bigint} NOT NULL,
      PRIMARY KEY (client_id, jti)
    )`,
    `CREATE INDEX client_assertion_jti_expires ON client_assertion_jti (expires_at)`,
  ],
};
