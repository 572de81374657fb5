import type { Migration } from './migration.js';

// Issue 10's hardening of the auth tables (see docs/auth.md):
// - account.login_lock_epoch: part of every per-username login counter's key; `account unlock` bumps it,
//   so every server process (in-process counters or Redis alike) starts the account's counts afresh on its
//   next token request, without the CLI having to reach those counters.
// - signing_key.retired_at: `keys retire`; a retired key neither signs nor verifies nor is published.
// - auth_secret: secrets every server process on the database shares, created on first start (the key of
//   the HMAC that stands for unknown usernames in logs and in login counter keys).
export const authHardeningMigration: Migration = {
  version: 6,
  name: 'auth-hardening',
  statements: (d) => [
    `ALTER TABLE account ADD COLUMN login_lock_epoch ${d.bigint} NOT NULL DEFAULT 0`,
    `ALTER TABLE signing_key ADD COLUMN retired_at TEXT`,
    `CREATE TABLE auth_secret (
      name TEXT PRIMARY KEY,
      secret TEXT NOT NULL,
      created_at TEXT NOT NULL
    )`,
  ],
};
