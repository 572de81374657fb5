import { resourcesMigration } from './001-resources.js';
import { accountsMigration } from './002-accounts.js';
import { searchIndexesMigration } from './003-search-indexes.js';
import { scribeMigration } from './004-scribe.js';
import { resourceLinksMigration } from './005-resource-links.js';
import { authHardeningMigration } from './006-auth-hardening.js';
import { clientKeysMigration } from './007-client-keys.js';
import { bulkExportMigration } from './008-bulk-export.js';
import { writePositionsMigration } from './009-write-positions.js';
import { exportBoundsMigration } from './010-export-bounds.js';
import { indexKeysMigration } from './011-index-keys.js';
import { tokenGenerationMigration } from './012-token-generation.js';
import { asyncRequestsMigration } from './013-async-requests.js';
import { subscriptionsMigration } from './014-subscriptions.js';
import { profilesMigration } from './015-profiles.js';
import type { Migration } from './migration.js';

/** Every migration, in version order. Add new ones at the end; never change a shipped one. */
export const MIGRATIONS: readonly Migration[] = [
  resourcesMigration,
  accountsMigration,
  searchIndexesMigration,
  scribeMigration,
  resourceLinksMigration,
  authHardeningMigration,
  clientKeysMigration,
  bulkExportMigration,
  writePositionsMigration,
  exportBoundsMigration,
  indexKeysMigration,
  tokenGenerationMigration,
  asyncRequestsMigration,
  subscriptionsMigration,
  profilesMigration,
];
