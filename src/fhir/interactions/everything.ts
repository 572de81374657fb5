// https://hl7.org/fhir/R4/patient-operation-everything.html
import { AppError } from '../../errors.js';
import { requireAccess } from '../access.js';
import { assertValidId } from '../ids.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

/**
 * `GET /fhir/Patient/{id}/$everything?start&end&_since&_type&_count`: a paged searchset of the patient's
 * compartment and what it refers to (search/everything.ts). The caller needs read on Patient; the
 * patient must exist (404) and not be deleted (410), as for a read.
 */
export async function everythingInteraction(
  request: FhirRequest,
  id: string,
  params: ReadonlyArray<readonly [string, string]>,
): Promise<FhirResponse> {
  requireAccess(request, 'read', 'Patient');
  assertValidId(id);
  const patient = await request.services.store.read('Patient', id);
  if (!patient) throw new AppError('resource-not-found', `Patient/${id} is not known`);
  if (patient.deleted) throw new AppError('resource-deleted', `Patient/${id} was deleted`);
  return request.services.search.everything(request, id, params);
}
