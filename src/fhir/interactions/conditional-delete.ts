// https://hl7.org/fhir/R4/http.html#3.1.0.7.1 (conditional delete)
import { AppError } from '../../errors.js';
import { mayRead, requireAccess, requireBinaryChangeable } from '../access.js';
import { findMatches, lockCriteria, parseCriteria, withMatchesAhead } from '../conditional.js';
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
      await lockCriteria(tx, type, criteria);
      const matches = await findMatches(request, tx, type, criteria);
      if (matches.length > 1) {
        throw new AppError('precondition-failed', `The criteria match ${matches.length} or more ${type} resources`);
      }
      if (matches.length === 0) return { status: 204 };
      if (type === 'Binary') await requireBinaryChangeable(request, store, matches[0]);
      const deleted = await store.delete(type, matches[0], { mayName: mayRead(request) });
      return { status: 204, versionId: deleted?.versionId };
    }),
  );
}
