// https://hl7.org/fhir/R4/http.html#patch: "PATCH [base]/[type]?[search parameters]", with the rules of
// conditional update for the matches: none → 404, one → that resource patched, several → 412.
import { AppError } from '../../errors.js';
import { requireAccess } from '../access.js';
import { parseCriteria, soleMatch, withMatchesAhead } from '../conditional.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { checkPatch, patchStored } from './patch.js';
import type { PatchFormat } from './patch.js';

export async function conditionalPatchInteraction(
  request: FhirRequest,
  type: string,
  query: string,
  format: PatchFormat,
  patch: unknown,
  ifMatch?: number,
): Promise<FhirResponse> {
  checkPatch(request, type, format, patch);
  requireAccess(request, 'search', type);
  const criteria = parseCriteria(type, query);
  return withMatchesAhead(request, [[type, criteria]], (request) =>
    request.services.store.transaction(async (store, tx) => {
      const match = await soleMatch(request, tx, type, criteria, 'The criteria');
      if (match === undefined) throw new AppError('resource-not-found', `No ${type} matches the criteria`);
      return patchStored(request, store, type, match, format, patch, ifMatch);
    }),
  );
}
