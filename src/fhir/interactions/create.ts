// https://hl7.org/fhir/R4/http.html#create
import { requireAccess } from '../access.js';
import { acceptResource } from '../resource-input.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { writeResponse } from './write-response.js';

export async function createInteraction(request: FhirRequest, type: string, body: unknown): Promise<FhirResponse> {
  requireAccess(request, 'create', type);
  const resource = acceptResource(request.services, type, body);
  // The server assigns the id: whatever id the client sent is ignored (CONTRACT.md).
  const { stored } = await request.services.store.create(resource);
  return writeResponse(request.services, stored, 201);
}
