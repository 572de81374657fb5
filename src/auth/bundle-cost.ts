// What a batch or transaction Bundle (POST to the FHIR base) costs against an account's rate limit: one
// point per entry, as if each had been sent on its own (https://hl7.org/fhir/R4/http.html#transaction).
// Otherwise a client held to 120 requests a minute could run 120,000 interactions in Bundles of 1,000.

/** The route of batch and transaction Bundles. */
export const FHIR_BATCH_PATH = '/fhir';

/**
 * Points for a Bundle body: max(1, entries). A body the interaction will refuse without running anything
 * (not a Bundle, entries not an array, more entries than AMBIENT_MAX_BUNDLE_ENTRIES: 413) costs one, like
 * any refused request.
 */
export function bundleCost(body: unknown, maxEntries: number): number {
  if (body === null || typeof body !== 'object') return 1;
  const { resourceType, entry: entries } = body as { resourceType?: unknown; entry?: unknown };
  if (resourceType !== 'Bundle') return 1;
  if (!Array.isArray(entries) || entries.length > maxEntries) return 1;
  return Math.max(1, entries.length);
}
