import type { Principal } from './principal.js';

/**
 * The operator at the command line (import, reindex): whoever can run the CLI on the database can do
 * anything to it already, so commands act with every FHIR permission and no scribe scopes.
 */
export const ADMINISTRATOR: Principal = {
  accountId: 'administrator',
  username: 'administrator (command line)',
  scopes: ['system/*.cruds'],
  canFhir: () => true,
  hasScope: (scope) => scope === 'system/*.cruds',
};
