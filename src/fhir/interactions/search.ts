// https://hl7.org/fhir/R4/search.html
import type { FhirResponse } from '../response.js';
import type { FhirRequest, SearchOptions } from '../services.js';

/**
 * `GET /fhir/{type}?...`, `POST /fhir/{type}/_search` and a Bundle's search entry (`type` given), or
 * `GET /fhir?_type=...` (`type` undefined): the caller names a known type before (404 or a Bundle's 400
 * otherwise); scopes, parameters and paging are the search engine's.
 */
export async function searchInteraction(
  request: FhirRequest,
  type: string | undefined,
  params: ReadonlyArray<readonly [string, string]>,
  options: SearchOptions,
): Promise<FhirResponse> {
  return request.services.search.search(request, type, params, options);
}
