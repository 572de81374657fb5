// Shared set-up of the search engine's database tests: a fresh database (databases.ts),
// migrated, with the engine and the store wired as app.ts wires them, and helpers that search as a
// caller allowed everything (or only some types) and return the Bundle parsed.
import type { Principal } from '../../src/auth/principal.js';
import { loadConfig } from '../../src/config.js';
import { loadR4Definitions } from '../../src/definitions/registry.js';
import type { FhirRequest } from '../../src/fhir/services.js';
import { createFhirServices } from '../../src/services.js';
import { Importer } from '../../src/import/importer.js';
import { migrate } from '../../src/storage/migrate.js';
import { openDatabase } from '../../src/storage/open-database.js';
import type { SqlDatabase } from '../../src/storage/sql/database.js';
import { SqlResourceStore } from '../../src/storage/sql-resource-store.js';
import type { FhirResource } from '../../src/storage/store.js';
import { testDatabase } from './databases.js';
import type { BACKENDS } from './databases.js';
import type { AmbientSearchEngine } from '../../src/search/engine.js';
import type { Plan, PlannedCriterion } from '../../src/search/plan.js';
import { ESTIMATE_CAP } from '../../src/search/sql/compile.js';
import { TEST_BASE } from './search-fixtures.js';

export interface SearchBundle {
  resourceType: 'Bundle';
  total?: number;
  link?: { relation: string; url: string }[];
  entry?: { fullUrl?: string; resource: FhirResource & { id: string }; search: { mode: string } }[];
}

export interface SearchTestEnv {
  readonly db: SqlDatabase;
  readonly engine: AmbientSearchEngine;
  readonly store: SqlResourceStore;
  readonly importer: Importer;
  /** Searches `type` (undefined: system search) with a query string; throws the AppError of a 4xx. */
  search(
    type: string | undefined,
    query: string,
    options?: { strict?: boolean; principal?: Principal },
  ): Promise<SearchBundle>;
  /** Ids (`id`, or `Type/id` when `qualified`) of the match entries, in order. */
  matchIds(bundle: SearchBundle, qualified?: boolean): string[];
  includeIds(bundle: SearchBundle): string[];
  dispose(): Promise<void>;
}

export const allowAll: Principal = {
  accountId: 'test',
  username: 'test',
  scopes: ['system/*.cruds'],
  canFhir: () => true,
  hasScope: () => true,
};

export function principalFor(searchable: readonly string[]): Principal {
  return {
    accountId: 'limited',
    username: 'limited',
    scopes: searchable.map((t) => `system/${t}.s`),
    canFhir: (action, type) => action === 'search' && searchable.includes(type),
    hasScope: () => false,
  };
}

/**
 * Estimates that make every criterion that could drive look broad (so each is probed row by row) or
 * rare (so each drives): the search suites run both ways, and the answers must not change.
 */
export type EstimateMode = 'from the data' | 'every criterion broad' | 'every criterion rare';

function forcedEstimate(rows: number): (plan: Plan) => Promise<Plan> {
  const annotate = (c: PlannedCriterion): PlannedCriterion =>
    c.kind === 'chain' || c.kind === 'has'
      ? { ...c, inner: annotate(c.inner), estimatedRows: rows }
      : { ...c, estimatedRows: rows };
  return (plan) => Promise.resolve({ ...plan, criteria: plan.criteria.map(annotate) });
}

export async function createSearchTestEnv(
  backend: (typeof BACKENDS)[number],
  estimates: EstimateMode = 'from the data',
): Promise<SearchTestEnv> {
  const database = await testDatabase(backend);
  const db = openDatabase(database.url);
  await migrate(db);
  const registry = loadR4Definitions();
  const config = loadConfig({ AMBIENT_PUBLIC_URL: TEST_BASE.replace(/\/fhir$/, '') });
  const services = createFhirServices(
    config,
    db,
    registry,
    estimates === 'from the data'
      ? {}
      : { estimate: forcedEstimate(estimates === 'every criterion broad' ? ESTIMATE_CAP + 1 : 0) },
  );
  const engine = services.search as AmbientSearchEngine;
  const store = services.store as SqlResourceStore;
  // The import command's loader: the API's transaction write path (validation, urn:uuid, conditional references).
  const importer = new Importer(services);
  return {
    db,
    engine,
    store,
    importer,
    async search(type, query, options = {}) {
      const request: FhirRequest = { services, principal: options.principal ?? allowAll };
      const response = await engine.search(request, type, [...new URLSearchParams(query)], {
        strict: options.strict ?? false,
      });
      return JSON.parse(response.body as string) as SearchBundle;
    },
    matchIds(bundle, qualified = false) {
      return (bundle.entry ?? [])
        .filter((e) => e.search.mode === 'match')
        .map((e) => (qualified ? `${e.resource.resourceType}/${e.resource.id}` : e.resource.id));
    },
    includeIds(bundle) {
      return (bundle.entry ?? [])
        .filter((e) => e.search.mode === 'include')
        .map((e) => `${e.resource.resourceType}/${e.resource.id}`);
    },
    async dispose() {
      await db.close();
      await database.dispose();
    },
  };
}
