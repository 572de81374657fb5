// https://hl7.org/fhir/R4/http.html#transaction (batch): each entry on its own, each answered with its
// response or its OperationOutcome. An entry's conditional references (`Patient?identifier=...`) are
// resolved as a transaction resolves them (http.html#trules), in the entry's own write transaction: one
// match becomes the reference, none or several fail the entry with 412.
import { AppError } from '../../errors.js';
import { bundleJson } from '../bundle.js';
import type { BundleEntry } from '../bundle.js';
import { parseEntryRequest } from '../bundle-entry-request.js';
import type { EntryAction } from '../bundle-entry-request.js';
import { entryCriteria, withMatchesAhead } from '../conditional.js';
import { forEachReference, parseConditionalReference } from '../references.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';
import { errorEntry, performEntry, responseEntry, ResponseBytes } from './bundle-entry.js';
import type { BundleOptions } from './bundle-entry.js';
import type { InputEntry } from './bundle-input.js';
import { conditionalTarget, rewrittenCopy } from './transaction-references.js';

export async function batchInteraction(
  request: FhirRequest,
  entries: readonly InputEntry[],
  options: BundleOptions,
): Promise<FhirResponse> {
  const accessed: string[] = [];
  const responses: BundleEntry[] = [];
  const bytes = new ResponseBytes(request.services.config.maxPageBytes);
  for (const input of entries) {
    try {
      bytes.assertRoom();
      const action = parseEntryRequest(input?.request, request.services.baseUrl, request.services.router);
      const response = await performBatchEntry(request, action, input.resource as Record<string, unknown>);
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

/** One entry, its conditional references first resolved (and its criteria searched ahead) where it has some. */
async function performBatchEntry(
  request: FhirRequest,
  action: EntryAction,
  resource: Record<string, unknown> | undefined,
): Promise<FhirResponse> {
  const references = new Set<string>();
  forEachReference(resource, (reference) => {
    if (parseConditionalReference(reference)) references.add(reference);
  });
  if (references.size === 0) return performEntry(request, { action, resource });
  // The entry's own criteria too, so that none is searched ahead inside the open transaction.
  const wanted = entryCriteria(action, resource);
  return withMatchesAhead(request, wanted, (request) =>
    request.services.store.transaction(async (store, tx) => {
      const txRequest: FhirRequest = { ...request, services: { ...request.services, store } };
      const rewrites = new Map<string, string>();
      for (const reference of references) rewrites.set(reference, await conditionalTarget(txRequest, tx, reference));
      return performEntry(txRequest, { action, resource: rewrittenCopy(resource!, rewrites) });
    }),
  );
}
