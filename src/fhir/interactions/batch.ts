// https://hl7.org/fhir/R4/http.html#transaction (batch): each entry on its own, each answered with its
// response or its OperationOutcome.
import { AppError } from '../../errors.js';
import { bundleJson } from '../bundle.js';
import type { BundleEntry } from '../bundle.js';
import { parseEntryRequest } from '../bundle-entry-request.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { errorEntry, performEntry, responseEntry, ResponseBytes } from './bundle-entry.js';
import type { BundleOptions } from './bundle-entry.js';
import type { InputEntry } from './bundle-input.js';

export async function batchInteraction(
  request: FhirRequest,
  entries: readonly InputEntry[],
  options: BundleOptions,
): Promise<FhirResponse> {
  const accessed: string[] = [];
  const responses: BundleEntry[] = [];
  const isType = (name: string) => request.services.types.isResourceType(name);
  const bytes = new ResponseBytes(request.services.config.maxPageBytes);
  for (const input of entries) {
    try {
      bytes.assertRoom();
      const action = parseEntryRequest(input?.request, request.services.baseUrl, isType);
      const response = await performEntry(request, { action, resource: input.resource as Record<string, unknown> });
      accessed.push(...(response.accessed ?? []));
      const entry = responseEntry(request, response, options);
      bytes.add(entry);
      responses.push(entry);
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      responses.push(errorEntry(error));
    }
  }
  return { status: 200, body: bundleJson({ type: 'batch-response', entries: responses }), accessed };
}
