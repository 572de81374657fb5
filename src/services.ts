// The FHIR layer's services composed from their implementations (storage, search, validation). It sits
// outside fhir/ so that fhir/ depends only on the interfaces in fhir/services.ts, never on search/.
import type { Config } from './config.js';
import type { R4Registry } from './definitions/registry.js';
import { CursorKey } from './page-cursor.js';
import { AmbientSearchEngine } from './search/engine.js';
import type { SearchEngineOptions } from './search/engine.js';
import type { SqlDatabase } from './storage/sql/database.js';
import { LinkWriter } from './storage/link-writer.js';
import { SqlResourceStore } from './storage/sql-resource-store.js';
import { SubscriptionIndexWriter } from './subscriptions/index-writer.js';
import { ProfileIndexWriter } from './profiles/index-writer.js';
import { StoredProfiles } from './profiles/profiles.js';
import { WritePositions } from './storage/write-positions.js';
import { validateResource } from './validation/validate.js';
import { FHIR_ROUTES } from './fhir/router.js';
import { FhirRouter } from './fhir/routing.js';
import type { FhirServices } from './fhir/services.js';

/** The FHIR layer's services on one database: what the HTTP API and the import command both write through. */
export function createFhirServices(
  config: Config,
  db: SqlDatabase,
  definitions: R4Registry,
  searchOptions?: SearchEngineOptions,
): FhirServices & { readonly search: AmbientSearchEngine } {
  const search = new AmbientSearchEngine(db, definitions, config, searchOptions);
  const store = new SqlResourceStore(
    db,
    [
      search.indexWriter,
      new LinkWriter(search.catalog.references),
      new SubscriptionIndexWriter(),
      new ProfileIndexWriter(),
    ],
    Date.now,
    config.referentialIntegrity,
  );
  return {
    config,
    store,
    search,
    types: definitions,
    validate: (resource) => validateResource(resource, definitions, search.catalog.references),
    profiles: new StoredProfiles(db, store, definitions, search.catalog.references),
    baseUrl: `${config.publicUrl}/fhir`,
    references: search.catalog.references,
    router: new FhirRouter(FHIR_ROUTES, (name) => definitions.isResourceType(name)),
    cursorKey: new CursorKey(db),
    writePositions:
      config.databaseReadUrls.length > 0 && db.dialect.writePosition !== undefined ? new WritePositions(db) : undefined,
  };
}
