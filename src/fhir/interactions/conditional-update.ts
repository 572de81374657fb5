// https://hl7.org/fhir/R4/http.html#cond-update
import { AppError } from '../../errors.js';
import { requireAccess, requireBinaryChangeable } from '../access.js';
import { parseCriteria, soleMatch, withMatchesAhead } from '../conditional.js';
import { assertValidId } from '../ids.js';
import { acceptResource } from '../resource-input.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { writeResponse } from './write-response.js';

/** PUT /fhir/{type}?criteria: no match → create, one match → update it, several → 412. */
export async function conditionalUpdateInteraction(
  request: FhirRequest,
  type: string,
  query: string,
  body: unknown,
  ifMatch?: number,
): Promise<FhirResponse> {
  requireAccess(request, 'update', type);
  requireAccess(request, 'search', type);
  const criteria = parseCriteria(type, query);
  const bodyId = body && typeof body === 'object' ? (body as { id?: unknown }).id : undefined;
  if (bodyId !== undefined && typeof bodyId !== 'string')
    throw new AppError('invalid-id', 'The body id must be a string');
  if (bodyId !== undefined) assertValidId(bodyId);
  return withMatchesAhead(request, [[type, criteria]], (request) =>
    request.services.store.transaction(async (store, tx) => {
      const id = await soleMatch(request, tx, type, criteria, 'The criteria');
      if (id === undefined) {
        requireAccess(request, 'create', type);
        const resource = await acceptResource(request, type, body);
        if (bodyId === undefined) return writeResponse(request, (await store.create(resource)).stored, 201);
        // No match and an id in the body: an update-as-create with that id, but never an update of another
        // resource the criteria did not match (R5 http.html#cond-update states it: 409; HAPI refuses it too, HAPI-0825).
        const existing = await store.read(type, bodyId, { lock: true });
        if (existing && !existing.deleted) {
          throw new AppError(
            'conditional-id-exists',
            `No ${type} matches the criteria, and the body's id names ${type}/${bodyId}, which exists: a conditional update does not update a resource its criteria do not match`,
          );
        }
        const { stored } = await store.update({ ...resource, id: bodyId }, { ifMatch });
        return writeResponse(request, stored, 201);
      }
      if (bodyId !== undefined && bodyId !== id) {
        throw new AppError('id-mismatch', `The body's id ${bodyId} differs from the matching resource ${type}/${id}`);
      }
      if (type === 'Binary') await requireBinaryChangeable(request, store, id);
      const resource = await acceptResource(request, type, { ...(body as object), id }, id);
      const { stored } = await store.update({ ...resource, id }, { ifMatch });
      return writeResponse(request, stored, 200);
    }),
  );
}
