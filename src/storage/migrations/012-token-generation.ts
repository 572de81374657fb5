import type { Migration } from './migration.js';

// Revocation exact to the token (docs/auth.md, "Revocation"): every revocation of an account (revoke-tokens,
// a password change, a deactivation, the loss of API access) adds one to account.token_generation, and every
// token carries the generation it was issued in; a token of an earlier generation is refused. Unlike a time
// in whole seconds, a counter tells apart a token issued just before a revocation from one issued just after
// it, within one second, on any number of hosts.
export const tokenGenerationMigration: Migration = {
  version: 12,
  name: 'token-generation',
  statements: (d) => [`ALTER TABLE account ADD COLUMN token_generation ${d.bigint} NOT NULL DEFAULT 0`],
};
