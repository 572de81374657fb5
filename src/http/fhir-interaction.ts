// The FHIR interaction a request is (https://hl7.org/fhir/R4/http.html), from its method and route pattern
// only: a bounded set of names for the access line and the metrics labels, never an id or a raw path.
import type { FastifyRequest } from 'fastify';

const BY_ROUTE: Record<string, Record<string, string>> = {
  '/fhir/metadata': { GET: 'capabilities' },
  '/fhir/_history': { GET: 'history-system' },
  '/fhir': { GET: 'search-system', POST: 'batch' },
  '/fhir/:type': { GET: 'search-type', POST: 'create', PUT: 'update', DELETE: 'delete' },
  '/fhir/:type/_search': { POST: 'search-type' },
  '/fhir/:type/_history': { GET: 'history-type' },
  '/fhir/:type/$validate': { POST: 'operation' },
  '/fhir/:type/:id': { GET: 'read', PUT: 'update', PATCH: 'patch', DELETE: 'delete' },
  '/fhir/:type/:id/$validate': { POST: 'operation' },
  '/fhir/:type/:id/_history': { GET: 'history-instance' },
  '/fhir/:type/:id/_history/:vid': { GET: 'vread' },
  '/fhir/:type/:id/$everything': { GET: 'operation' },
  '/fhir/:type/:id/:member': { GET: 'search-compartment' },
  '/fhir/:type/:id/_search': { POST: 'search-compartment' },
  '/fhir/:type/:id/:member/_search': { POST: 'search-compartment' },
};

/**
 * read, vread, update, patch, delete, history-instance, history-type, history-system, create, search-type,
 * search-compartment, search-system, capabilities, batch, transaction, operation; undefined for a request that is not one
 * (outside /fhir, or no route matched).
 */
export function fhirInteraction(request: Pick<FastifyRequest, 'method' | 'routeOptions' | 'body'>): string | undefined {
  const route = request.routeOptions?.url;
  if (route === undefined) return undefined;
  const method = request.method === 'HEAD' ? 'GET' : request.method;
  const interaction = BY_ROUTE[route]?.[method];
  if (interaction === 'batch') {
    const type = (request.body as { type?: unknown } | undefined)?.type;
    return type === 'transaction' ? 'transaction' : 'batch';
  }
  return interaction;
}
