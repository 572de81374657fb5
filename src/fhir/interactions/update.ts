// https://hl7.org/fhir/R4/http.html#update
import { AppError } from '../../errors.js';
import { requireAccess, requireBinaryChangeable } from '../access.js';
import { assertValidId } from '../ids.js';
import { acceptResource } from '../resource-input.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { writeResponse } from './write-response.js';

export async function updateInteraction(
  request: FhirRequest,
  type: string,
  id: string,
  body: unknown,
  ifMatch?: number,
  /** `If-None-Match: *`: only create; an existing resource is a 412 (https://hl7.org/fhir/R4/http.html#concurrency). */
  createOnly = false,
): Promise<FhirResponse> {
  requireAccess(request, 'update', type);
  assertValidId(id);
  const resource = await acceptResource(request, type, body, id);
  // Update-as-create: a PUT to an id that does not exist yet (or was deleted) creates it with that id
  // (201). That is a create, so it needs `c` (SMART v2). Whether it creates is known only once the
  // store has locked the row, so the check comes after the write, inside its transaction: a refusal
  // rolls the write back and nothing is stored.
  return request.services.store.transaction(async (store) => {
    if (type === 'Binary') await requireBinaryChangeable(request, store, id);
    if (createOnly) {
      const current = await store.read(type, id, { lock: true });
      if (current && !current.deleted) {
        throw new AppError('precondition-failed', `${type}/${id} exists already (If-None-Match: *)`);
      }
    }
    const { stored, created } = await store.update({ ...resource, id }, { ifMatch });
    if (created) requireAccess(request, 'create', type);
    return writeResponse(request, stored, created ? 201 : 200);
  });
}
