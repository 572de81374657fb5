// The thin adapter between HTTP and the FHIR layer: it registers the routes of the table (fhir/router.ts),
// reads paths, headers and bodies into the call their handler takes, and writes its FhirResponse. No FHIR
// logic lives here.
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { AppError } from '../errors.js';
import { requireAccess, requireAnyAccess } from '../fhir/access.js';
import type { PatchFormat } from '../fhir/interactions/patch.js';
import { pathOf, queryOf } from '../url-parts.js';
import { FHIR_ROUTES } from '../fhir/router.js';
import { fhirSegments, fhirUrl } from '../fhir/routing.js';
import type { FhirRoute, InteractionCall } from '../fhir/routing.js';
import type { FhirRequest, FhirServices } from '../fhir/services.js';
import type { FhirXml } from '../fhir/xml/fhir-xml.js';
import type { ReadAfter, ReadBudget } from '../storage/sql/database.js';
import type { WritePositions } from '../storage/write-positions.js';
import { isBinaryRead, sendRead } from './binary-reply.js';
import {
  registerRawContentParsers,
  registerXmlBodyParser,
  requestResource,
  XML_CONTENT_TYPES,
} from './body-parsers.js';
import { assertAcceptable, sendFhir } from './fhir-reply.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route of the table (fhir/router.ts) this Fastify route serves. */
    fhirRoute?: FhirRoute;
  }
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** GET's query parameters and, for POST _search, the form body's (https://hl7.org/fhir/R4/http.html#search). */
function searchParams(request: FastifyRequest, query: string): [string, string][] {
  const pairs = [...new URLSearchParams(query)];
  if (request.method === 'POST' && request.body && typeof request.body === 'object') {
    for (const [name, value] of Object.entries(request.body as Record<string, string | string[]>)) {
      for (const v of Array.isArray(value) ? value : [value]) pairs.push([name, String(v)]);
    }
  }
  return pairs;
}

/** POST _search: its parameters come as a form, if there is a body at all. */
function assertFormBody(request: FastifyRequest): void {
  const contentType = header(request, 'content-type') ?? '';
  if (request.body !== undefined && !contentType.startsWith('application/x-www-form-urlencoded')) {
    throw new AppError('unsupported-media-type', 'POST _search takes an application/x-www-form-urlencoded body');
  }
}

/** The request as the route's handler reads it: the same shape a Bundle entry gives (bundle-entry.ts). */
function httpCall(request: FastifyRequest, isResourceType: (name: string) => boolean): InteractionCall {
  const params = request.params as Record<string, string | undefined>;
  const query = queryOf(request.url);
  return {
    params,
    query,
    header: (name) => header(request, name),
    searchParams: () => searchParams(request, query),
    resource: () => requestResource(request, isResourceType, params.id),
    patch: () => ({ format: patchFormat(header(request, 'content-type')), document: request.body }),
    body: request.body,
  };
}

export interface FhirRoutesOptions {
  readonly services: FhirServices;
  /** Reads FHIR XML bodies (answers in XML are written by fhir-reply.ts). */
  readonly xml: FhirXml;
}

/** Every route of the table that this plugin serves (the rest: export-routes.ts), with the FHIR hooks. */
export async function fhirRoutes(app: FastifyInstance, options: FhirRoutesOptions): Promise<void> {
  const { services } = options;
  registerRawContentParsers(app, services.config.maxBodyBytes);
  registerXmlBodyParser(app, options.xml);
  app.addHook('onRequest', async (request) => authorizeBeforeBody(request, options));
  app.addHook('preHandler', async (request, reply) => startReadBudget(request, reply, services));
  // After a write succeeded (its transaction committed), before the client hears of it: where the
  // account's writes stand, for the read-your-writes check, from any server process.
  if (services.writePositions) {
    const positions = services.writePositions;
    app.addHook('onSend', async (request, reply, payload) => {
      const reads = request.method === 'GET' || request.method === 'HEAD' || request.url.includes('/_search');
      if (request.principal && !reads && reply.statusCode < 400) await positions.record(request.principal.accountId);
      return payload;
    });
  }
  const isResourceType = (name: string) => services.types.isResourceType(name);
  for (const route of FHIR_ROUTES) {
    const handler = route.handler;
    if (!handler) continue;
    app.route({
      method: route.method,
      url: fhirUrl(route),
      config: { fhirRoute: route, public: route.public },
      handler: async (request, reply) => {
        if (route.body === 'form') assertFormBody(request);
        const call = httpCall(request, isResourceType);
        const fhir = fhirRequest(request, services);
        const response = await handler(fhir, call);
        return route.reply === 'read'
          ? sendRead(request, reply, call.params.type ?? '', response)
          : sendFhir(request, reply, response);
      },
    });
  }
}

/**
 * Fastify's onRoute check: no route under /fhir exists outside the table. The reverse (every route of the
 * table is registered) is src/fhir/router.test.ts's.
 */
export function assertInRouteTable(route: RouteOptions, routes: readonly FhirRoute[]): void {
  if (route.url !== '/fhir' && !route.url.startsWith('/fhir/')) return;
  const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((m) => m !== 'HEAD');
  for (const method of methods) {
    if (!routes.some((listed) => listed.method === method && fhirUrl(listed) === route.url)) {
      throw new Error(`${method} ${route.url} is registered outside the FHIR route table (fhir/router.ts)`);
    }
  }
}

function fhirRequest(request: FastifyRequest, services: FhirServices): FhirRequest {
  const principal = request.principal!;
  // Its writes record the principal as their author (a Subscription's owner).
  return {
    services: { ...services, store: services.store.writingAs(principal) },
    principal,
    budget: request.readBudget,
  };
}

/**
 * After authentication (authenticated.ts), before the body is read: an operation the server lacks (400),
 * an unknown type (404) or a scope that refuses the request (403) is answered without reading it
 * (docs/security.md).
 */
async function authorizeBeforeBody(request: FastifyRequest, options: FhirRoutesOptions) {
  const { services } = options;
  const route = request.routeOptions.config.fhirRoute;
  // A Binary read may answer its own media type: it negotiates in sendRead (binary-reply.ts).
  if (!isBinaryRead(request)) assertAcceptable(request);
  // Fastify's patterns take `$name` or `metadata` as a parameter and know no type restriction; the table
  // does (`PUT /fhir/$export` and `POST /fhir/metadata` reach `/fhir/:type`): where it matches otherwise,
  // its answer (400 for an operation it lacks, 405, 404) stands.
  const type = (request.params as { type?: string }).type;
  if (request.url.includes('$') || (type !== undefined && !services.types.isResourceType(type))) {
    const path = pathOf(request.url);
    if (services.router.match(request.method, fhirSegments(path))?.route !== route)
      throw services.router.unmatched(path);
  }
  if (!route?.beforeBody) return;
  const call = {
    params: request.params as Record<string, string | undefined>,
    header: (name: string) => header(request, name),
  };
  // The checks read only the principal: no store bound to it (fhirRequest) is needed here.
  const asker: FhirRequest = { services, principal: request.principal! };
  for (const [action, type] of route.beforeBody(call)) {
    if (!services.types.isResourceType(type)) {
      throw new AppError('unknown-resource-type', `${type} is not a FHIR R4 resource type this server knows`);
    }
    if (typeof action === 'string') requireAccess(asker, action, type);
    else requireAnyAccess(asker, action, type);
  }
}

/**
 * Made once the body is in (a slow upload does not eat it): one budget for every search of the request (a
 * Bundle's entries share it). A response closed before it was written means the client went away: its
 * searches are stopped, not left running. The AbortController is made only when a search asks for its
 * signal: most requests never do, and one per request showed in the profile of the comparison workload.
 */
async function startReadBudget(request: FastifyRequest, reply: FastifyReply, services: FhirServices) {
  if (!request.principal) return;
  const budget = new RequestReadBudget(
    services.config.searchTimeoutMs,
    services.writePositions,
    request.principal.accountId,
  );
  request.readBudget = budget;
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) budget.clientWentAway();
  });
}

/**
 * A request's read budget. A class, not an object literal with getters: V8 keeps such a literal's
 * getters' scope, and through it the whole request, alive through young collections until the next
 * full one, so every request was promoted (docs/benchmarks.md, "What stands in the way").
 */
class RequestReadBudget implements ReadBudget {
  readonly deadline: number;
  private stop: AbortController | undefined;
  private clientGone = false;
  private lastWrite: Promise<string | undefined> | undefined;
  /** With replicas, a search reads from one only once it has replayed this account's last write. */
  readonly readAfter: ReadAfter | undefined;

  constructor(
    readonly limitMs: number,
    positions: WritePositions | undefined,
    accountId: string,
  ) {
    this.deadline = performance.now() + limitMs;
    this.readAfter = positions ? () => (this.lastWrite ??= positions.of(accountId)) : undefined;
  }

  get aborted(): boolean {
    return this.clientGone;
  }

  get signal(): AbortSignal {
    if (!this.stop) {
      this.stop = new AbortController();
      if (this.clientGone) this.stop.abort();
    }
    return this.stop.signal;
  }

  clientWentAway(): void {
    this.clientGone = true;
    this.stop?.abort();
  }
}

/** JSON Patch by its media type; FHIRPath Patch is a Parameters resource sent as FHIR JSON or XML. */
function patchFormat(contentType: string | undefined): PatchFormat {
  const mediaType = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (mediaType === 'application/json-patch+json') return 'json-patch';
  if (mediaType === 'application/fhir+json' || mediaType === 'application/json') return 'fhirpath-patch';
  if (XML_CONTENT_TYPES.includes(mediaType)) return 'fhirpath-patch';
  throw new AppError(
    'unsupported-media-type',
    'PATCH takes application/json-patch+json (JSON Patch) or application/fhir+json or application/fhir+xml (FHIRPath Patch Parameters)',
  );
}
