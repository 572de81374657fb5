// https://hl7.org/fhir/R4/http.html#delete
import { AppError } from '../../errors.js';
import { mayRead, requireAccess, requireBinaryChangeable } from '../access.js';
import { assertValidId } from '../ids.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

export async function deleteInteraction(request: FhirRequest, type: string, id: string): Promise<FhirResponse> {
  requireAccess(request, 'delete', type);
  assertValidId(id);
  // One transaction as store.delete alone would open: a Binary's context is checked on the row it deletes.
  const deleted = await request.services.store.transaction(async (store) => {
    if (type === 'Binary') await requireBinaryChangeable(request, store, id);
    return store.delete(type, id, { mayName: mayRead(request) });
  });
  if (!deleted) throw new AppError('resource-not-found', `${type}/${id} is not known`);
  // Deleting a deleted resource is not an error (the spec calls delete idempotent): 204 again.
  return { status: 204, versionId: deleted.versionId };
}
