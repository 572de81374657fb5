// https://hl7.org/fhir/R4/http.html#patch: "PATCH [base]/[type]?[search parameters]", with the rules of
// conditional update for the matches: none → 404, one → that resource patched, several → 412.
import { AppError } from '../../errors.js';
import { requireAccess } from '../access.js';
import { findMatches, lockCriteria, parseCriteria, withMatchesAhead } from '../conditional.js';
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
      await lockCriteria(tx, type, criteria);
      const matches = await findMatches(request, tx, type, criteria);
      if (matches.length > 1) {
        throw new AppError('precondition-failed', `The criteria match ${matches.length} or more ${type} resources`);
      }
      if (matches.length === 0) throw new AppError('resource-not-found', `No ${type} matches the criteria`);
      return patchStored(request, store, type, matches[0], format, patch, ifMatch);
    }),
  );
}
