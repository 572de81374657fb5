// https://hl7.org/fhir/R4/http.html#update
import { requireAccess } from '../access.js';
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
): Promise<FhirResponse> {
  requireAccess(request, 'update', type);
  assertValidId(id);
  const resource = acceptResource(request.services, type, body, id);
  // Update-as-create: a PUT to an id that does not exist yet creates it with that id (201).
  const { stored, created } = await request.services.store.update({ ...resource, id }, { ifMatch });
  return writeResponse(request.services, stored, created ? 201 : 200);
}
