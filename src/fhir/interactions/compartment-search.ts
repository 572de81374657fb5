// https://hl7.org/fhir/R4/search.html#2.21.1.2 (compartment search), https://hl7.org/fhir/R4/compartmentdefinition.html
import { AppError } from '../../errors.js';
import { assertValidId } from '../ids.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest, SearchOptions } from '../services.js';

/**
 * `GET /fhir/{compartment}/{id}/{type}?...`: a search of `type` (or `*`, every member type the caller
 * may search) inside the R4 compartment of `compartment/id`. A compartment type R4 does not define is
 * no endpoint (404); the search itself, scopes included, is the search engine's.
 */
export async function compartmentSearchInteraction(
  request: FhirRequest,
  compartment: string,
  id: string,
  type: string,
  params: ReadonlyArray<readonly [string, string]>,
  options: SearchOptions,
): Promise<FhirResponse> {
  const { types } = request.services;
  if (!types.compartment(compartment)) {
    const known = types.compartments.map((c) => c.code).join(', ');
    throw new AppError(
      'unknown-route',
      `No FHIR endpoint at ${compartment}/${id}/${type}: ${compartment} is not an R4 compartment (${known})`,
    );
  }
  if (type !== '*' && !types.isResourceType(type)) {
    throw new AppError('unknown-resource-type', `${type} is not a FHIR R4 resource type this server knows`);
  }
  assertValidId(id);
  return request.services.search.compartmentSearch(request, compartment, id, type, params, options);
}
