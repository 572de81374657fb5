// The FHIR interaction a request is (https://hl7.org/fhir/R4/http.html), from the table's route it was
// served by (fhir/router.ts): a bounded set of names for the access line and the metrics labels, never
// an id or a raw path.
import type { FastifyRequest } from 'fastify';

/**
 * read, vread, update, patch, delete, history-instance, history-type, history-system, create, search-type,
 * search-compartment, search-system, capabilities, batch, transaction, operation; undefined for a request that is not one
 * (outside /fhir, or no route matched).
 */
export function fhirInteraction(request: Pick<FastifyRequest, 'routeOptions' | 'body'>): string | undefined {
  const interaction = request.routeOptions?.config?.fhirRoute?.interaction;
  if (interaction === 'batch') {
    const type = (request.body as { type?: unknown } | undefined)?.type;
    return type === 'transaction' ? 'transaction' : 'batch';
  }
  return interaction;
}
