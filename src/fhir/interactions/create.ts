// https://hl7.org/fhir/R4/http.html#create (and #ccreate: conditional create with If-None-Exist)
import { requireAccess } from '../access.js';
import { parseCriteria, soleMatch, withMatchesAhead } from '../conditional.js';
import { acceptResource } from '../resource-input.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { writeResponse } from './write-response.js';

export interface CreateOptions {
  /** If-None-Exist: create only when no resource matches these search criteria. */
  readonly ifNoneExist?: string;
  /** The id to create with (transaction Bundles assign ids before writing); otherwise the server's. */
  readonly id?: string;
}

export async function createInteraction(
  request: FhirRequest,
  type: string,
  body: unknown,
  options: CreateOptions = {},
): Promise<FhirResponse> {
  requireAccess(request, 'create', type);
  // The server assigns the id: whatever id the client sent is ignored (docs/api.md).
  const resource = await acceptResource(request, type, body);
  const { store } = request.services;
  if (options.ifNoneExist === undefined) {
    const { stored } = await store.create(resource, { id: options.id });
    return writeResponse(request, stored, 201);
  }
  requireAccess(request, 'search', type);
  const criteria = parseCriteria(type, options.ifNoneExist);
  return withMatchesAhead(request, [[type, criteria]], (request) =>
    store.transaction(async (txStore, tx) => {
      const match = await soleMatch(request, tx, type, criteria, 'If-None-Exist');
      if (match !== undefined) {
        // Already there: answer it as it is (200), create nothing.
        const existing = await txStore.read(type, match);
        if (existing && !existing.deleted) {
          return writeResponse(request, existing, 200);
        }
      }
      const { stored } = await txStore.create(resource, { id: options.id });
      return writeResponse(request, stored, 201);
    }),
  );
}
