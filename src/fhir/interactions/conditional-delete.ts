// https://hl7.org/fhir/R4/http.html#3.1.0.7.1 (conditional delete)
import { mayRead, requireAccess, requireBinaryChangeable } from '../access.js';
import { parseCriteria, soleMatch, withMatchesAhead } from '../conditional.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

/** DELETE /fhir/{type}?criteria: deletes the one match (204); none is 204 too; several → 412. */
export async function conditionalDeleteInteraction(
  request: FhirRequest,
  type: string,
  query: string,
): Promise<FhirResponse> {
  requireAccess(request, 'delete', type);
  requireAccess(request, 'search', type);
  const criteria = parseCriteria(type, query);
  return withMatchesAhead(request, [[type, criteria]], (request) =>
    request.services.store.transaction(async (store, tx) => {
      const match = await soleMatch(request, tx, type, criteria, 'The criteria');
      if (match === undefined) return { status: 204 };
      if (type === 'Binary') await requireBinaryChangeable(request, store, match);
      const deleted = await store.delete(type, match, { mayName: mayRead(request) });
      return { status: 204, versionId: deleted?.versionId };
    }),
  );
}
