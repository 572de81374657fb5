// The thin adapter between HTTP and the FHIR layer: it reads paths, headers and bodies, calls one
// interaction, and writes its FhirResponse. No FHIR logic lives here.
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator, FhirAction, Principal } from '../auth/principal.js';
import { AppError } from '../errors.js';
import { isExportPath } from '../export/kickoff.js';
import { requireAccess } from '../fhir/access.js';
import { operationNotSupported } from '../fhir/bundle-entry-request.js';
import { parseETagVersion } from '../fhir/ids.js';
import { capabilityStatement } from '../fhir/interactions/capabilities.js';
import { compartmentSearchInteraction } from '../fhir/interactions/compartment-search.js';
import { conditionalDeleteInteraction } from '../fhir/interactions/conditional-delete.js';
import { conditionalUpdateInteraction } from '../fhir/interactions/conditional-update.js';
import { createInteraction } from '../fhir/interactions/create.js';
import { deleteInteraction } from '../fhir/interactions/delete.js';
import { everythingInteraction } from '../fhir/interactions/everything.js';
import { historyInteraction } from '../fhir/interactions/history.js';
import { patchInteraction } from '../fhir/interactions/patch.js';
import type { PatchFormat } from '../fhir/interactions/patch.js';
import { readInteraction } from '../fhir/interactions/read.js';
import { bundleInteraction } from '../fhir/interactions/transaction.js';
import { updateInteraction } from '../fhir/interactions/update.js';
import { validateInteraction } from '../fhir/interactions/validate.js';
import { vreadInteraction } from '../fhir/interactions/vread.js';
import type { FhirRequest, FhirServices } from '../fhir/services.js';
import type { ReadBudget } from '../storage/sql/database.js';
import { isBinaryRead, sendRead } from './binary-reply.js';
import { registerRawContentParsers, requestResource } from './body-parsers.js';
import { assertJsonFormat, FHIR_JSON, preferredReturn, sendFhir } from './fhir-reply.js';

/**
 * What a route's caller must be allowed, as far as the method, path and headers tell, before its body is
 * read: every [action, type] pair is needed. The interaction checks everything again, with the body; this
 * only keeps a body its scopes refuse from being read and parsed (docs/security.md).
 */
type AccessBeforeBody = (request: FastifyRequest) => readonly (readonly [FhirAction, string])[];

declare module 'fastify' {
  interface FastifyContextConfig {
    accessBeforeBody?: AccessBeforeBody;
  }
  interface FastifyRequest {
    principal?: Principal;
    /** The time this request's searches may take, and the signal that the client went away. */
    readBudget?: ReadBudget;
  }
}

type Params = { type: string; id: string; vid: string };

function single(request: FastifyRequest): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(request.query as Record<string, string | string[]>)) {
    out[name] = Array.isArray(value) ? value[value.length - 1] : value;
  }
  return out;
}

function queryString(request: FastifyRequest): string {
  const at = request.url.indexOf('?');
  return at < 0 ? '' : request.url.slice(at + 1);
}

/** If-Match as a version number (a malformed ETag is a 400), or undefined when absent. */
function ifMatchVersion(request: FastifyRequest): number | undefined {
  const ifMatch = header(request, 'if-match');
  return ifMatch ? parseETagVersion(ifMatch) : undefined;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export interface FhirRoutesOptions {
  readonly services: FhirServices;
  readonly authenticator: Authenticator;
  readonly version: string;
}

export async function fhirRoutes(app: FastifyInstance, options: FhirRoutesOptions): Promise<void> {
  const { services, authenticator } = options;

  const fhirRequest = (request: FastifyRequest): FhirRequest => ({
    services,
    principal: request.principal!,
    budget: request.readBudget,
  });
  const knownType = (type: string): string => {
    if (!services.types.isResourceType(type)) {
      throw new AppError('unknown-resource-type', `${type} is not a FHIR R4 resource type this server knows`);
    }
    return type;
  };
  const isResourceType = (name: string) => services.types.isResourceType(name);
  registerRawContentParsers(app, services.config.maxBodyBytes);
  /** Route options saying which access on the path's type the route needs before its body is read. */
  const needsOnType = (...actions: FhirAction[]) => ({
    config: {
      accessBeforeBody: (request: FastifyRequest) =>
        actions.map((action) => [action, (request.params as Params).type] as const),
    },
  });

  // The one place where FHIR requests are authenticated: everything under /fhir but the metadata.
  app.addHook('onRequest', async (request, reply) => {
    // A Binary read may answer its own media type: it negotiates in sendRead (binary-reply.ts).
    if (!isBinaryRead(request)) assertJsonFormat(request);
    const path = request.url.split('?')[0];
    const lacking = unsupportedOperation(path, (name) => services.types.isResourceType(name));
    if (lacking) throw lacking;
    if (path === '/fhir/metadata' || path === '/fhir/metadata/') return;
    request.principal = await authenticator.authenticate(request, reply);
    // onRequest runs before the body is read: an unknown type (404) or a scope that refuses the request
    // (403) is answered without reading it.
    const needed = request.routeOptions.config.accessBeforeBody?.(request) ?? [];
    for (const [action, type] of needed) requireAccess(fhirRequest(request), action, knownType(type));
  });
  app.addHook('preHandler', async (request, reply) => {
    if (!request.principal) return;
    // Made once the body is in (a slow upload does not eat it): one budget for every search of the request (a Bundle's entries share it). A response closed
    // before it was written means the client went away: its searches are stopped, not left running.
    // The AbortController is made only when a search asks for its signal: most requests never do, and
    // one per request showed in the profile of the comparison workload.
    let stop: AbortController | undefined;
    let clientGone = false;
    const limitMs = services.config.searchTimeoutMs;
    // With replicas, a search reads from one only once it has replayed this account's last write.
    const positions = services.writePositions;
    const accountId = request.principal.accountId;
    let lastWrite: Promise<string | undefined> | undefined;
    request.readBudget = {
      deadline: performance.now() + limitMs,
      limitMs,
      get signal() {
        if (!stop) {
          stop = new AbortController();
          if (clientGone) stop.abort();
        }
        return stop.signal;
      },
      readAfter: positions ? () => (lastWrite ??= positions.of(accountId)) : undefined,
    };
    reply.raw.once('close', () => {
      if (reply.raw.writableFinished) return;
      clientGone = true;
      stop?.abort();
    });
  });

  // After a write succeeded (its transaction committed), before the client hears of it: where the
  // account's writes stand, for the read-your-writes check above, from any server process.
  if (services.writePositions) {
    const positions = services.writePositions;
    app.addHook('onSend', async (request, reply, payload) => {
      const reads = request.method === 'GET' || request.method === 'HEAD' || request.url.includes('/_search');
      if (request.principal && !reads && reply.statusCode < 400) await positions.record(request.principal.accountId);
      return payload;
    });
  }

  app.get('/fhir/metadata', async (request, reply) =>
    reply.type(FHIR_JSON).send(capabilityStatement(services, options.version)),
  );

  app.get('/fhir/_history', async (request, reply) =>
    sendFhir(request, reply, await historyInteraction(fhirRequest(request), single(request))),
  );

  const searchParams = (request: FastifyRequest): [string, string][] => {
    const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '';
    const pairs = [...new URLSearchParams(query)];
    // POST _search: the form body's parameters join the URL's (https://hl7.org/fhir/R4/http.html#search).
    if (request.method === 'POST' && request.body && typeof request.body === 'object') {
      for (const [name, value] of Object.entries(request.body as Record<string, string | string[]>)) {
        for (const v of Array.isArray(value) ? value : [value]) pairs.push([name, String(v)]);
      }
    }
    return pairs;
  };
  const searchOptions = (request: FastifyRequest) => ({
    strict: /handling\s*=\s*strict/i.test(header(request, 'prefer') ?? ''),
  });

  app.post('/fhir', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await bundleInteraction(fhirRequest(request), request.body, {
        returnResources: preferredReturn(request) !== 'minimal',
      }),
    ),
  );

  app.get('/fhir', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await services.search.search(fhirRequest(request), undefined, searchParams(request), searchOptions(request)),
    ),
  );

  app.get<{ Params: Params }>('/fhir/:type', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await services.search.search(
        fhirRequest(request),
        knownType(request.params.type),
        searchParams(request),
        searchOptions(request),
      ),
    ),
  );

  /** POST _search: its parameters come as a form, if there is a body at all. */
  const assertFormBody = (request: FastifyRequest): void => {
    const contentType = header(request, 'content-type') ?? '';
    if (request.body !== undefined && !contentType.startsWith('application/x-www-form-urlencoded')) {
      throw new AppError('unsupported-media-type', 'POST _search takes an application/x-www-form-urlencoded body');
    }
  };

  app.post<{ Params: Params }>('/fhir/:type/_search', needsOnType('search'), async (request, reply) => {
    assertFormBody(request);
    return sendFhir(
      request,
      reply,
      await services.search.search(
        fhirRequest(request),
        knownType(request.params.type),
        searchParams(request),
        searchOptions(request),
      ),
    );
  });

  app.post<{ Params: Params }>(
    '/fhir/:type',
    {
      config: {
        // A conditional create (If-None-Exist) searches too.
        accessBeforeBody: (request: FastifyRequest) => {
          const type = (request.params as Params).type;
          return header(request, 'if-none-exist') === undefined
            ? [['create', type] as const]
            : [['create', type] as const, ['search', type] as const];
        },
      },
    },
    async (request, reply) =>
      sendFhir(
        request,
        reply,
        await createInteraction(
          fhirRequest(request),
          knownType(request.params.type),
          requestResource(request, isResourceType),
          {
            ifNoneExist: header(request, 'if-none-exist'),
          },
        ),
      ),
  );

  app.put<{ Params: Params }>('/fhir/:type', needsOnType('update', 'search'), async (request, reply) => {
    return sendFhir(
      request,
      reply,
      await conditionalUpdateInteraction(
        fhirRequest(request),
        knownType(request.params.type),
        queryString(request),
        requestResource(request, isResourceType),
        ifMatchVersion(request),
      ),
    );
  });

  app.delete<{ Params: Params }>('/fhir/:type', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await conditionalDeleteInteraction(fhirRequest(request), knownType(request.params.type), queryString(request)),
    ),
  );

  app.get<{ Params: Params }>('/fhir/:type/_history', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await historyInteraction(fhirRequest(request), single(request), knownType(request.params.type)),
    ),
  );

  app.get<{ Params: Params }>('/fhir/:type/:id', async (request, reply) => {
    const ifNoneMatch = header(request, 'if-none-match');
    const ifModifiedSince = header(request, 'if-modified-since');
    const since = ifModifiedSince ? Date.parse(ifModifiedSince) : NaN;
    return sendRead(
      request,
      reply,
      request.params.type,
      await readInteraction(fhirRequest(request), knownType(request.params.type), request.params.id, {
        ifNoneMatch: ifNoneMatch ? conditionalVersion(ifNoneMatch) : undefined,
        ifModifiedSince: Number.isNaN(since) ? undefined : since,
      }),
    );
  });

  app.put<{ Params: Params }>('/fhir/:type/:id', needsOnType('update'), async (request, reply) => {
    return sendFhir(
      request,
      reply,
      await updateInteraction(
        fhirRequest(request),
        knownType(request.params.type),
        request.params.id,
        requestResource(request, isResourceType, request.params.id),
        ifMatchVersion(request),
        header(request, 'if-none-match')?.trim() === '*',
      ),
    );
  });

  app.patch<{ Params: Params }>('/fhir/:type/:id', needsOnType('update'), async (request, reply) => {
    return sendFhir(
      request,
      reply,
      await patchInteraction(
        fhirRequest(request),
        knownType(request.params.type),
        request.params.id,
        patchFormat(header(request, 'content-type')),
        request.body,
        ifMatchVersion(request),
      ),
    );
  });

  app.post<{ Params: Params }>('/fhir/:type/$validate', needsOnType('read'), async (request, reply) =>
    sendFhir(
      request,
      reply,
      await validateInteraction(fhirRequest(request), knownType(request.params.type), request.body),
    ),
  );

  app.post<{ Params: Params }>('/fhir/:type/:id/$validate', needsOnType('read'), async (request, reply) =>
    sendFhir(
      request,
      reply,
      await validateInteraction(fhirRequest(request), knownType(request.params.type), request.body, request.params.id),
    ),
  );

  app.delete<{ Params: Params }>('/fhir/:type/:id', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await deleteInteraction(fhirRequest(request), knownType(request.params.type), request.params.id),
    ),
  );

  app.get<{ Params: Params }>('/fhir/:type/:id/_history', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await historyInteraction(
        fhirRequest(request),
        single(request),
        knownType(request.params.type),
        request.params.id,
      ),
    ),
  );

  app.get<{ Params: Params }>('/fhir/:type/:id/$everything', async (request, reply) =>
    sendFhir(
      request,
      reply,
      await everythingInteraction(fhirRequest(request), request.params.id, searchParams(request)),
    ),
  );

  // Compartment search: `GET [base]/[compartment]/[id]/[type]`, and as POST (https://hl7.org/fhir/R4/http.html#search)
  // `[base]/[compartment]/[id]/[type]/_search` and `[base]/[compartment]/[id]/_search` (every member type, as `*`).
  const compartmentSearch = async (
    request: FastifyRequest<{ Params: { type: string; id: string; member?: string } }>,
    reply: FastifyReply,
  ) => {
    if (request.method === 'POST') assertFormBody(request);
    return sendFhir(
      request,
      reply,
      await compartmentSearchInteraction(
        fhirRequest(request),
        request.params.type,
        request.params.id,
        request.params.member ?? '*',
        searchParams(request),
        searchOptions(request),
      ),
    );
  };
  app.get('/fhir/:type/:id/:member', compartmentSearch);
  app.post('/fhir/:type/:id/_search', compartmentSearch);
  app.post(
    '/fhir/:type/:id/:member/_search',
    {
      config: {
        accessBeforeBody: (request: FastifyRequest) => [
          ['search', (request.params as { member: string }).member] as const,
        ],
      },
    },
    compartmentSearch,
  );

  app.get<{ Params: Params }>('/fhir/:type/:id/_history/:vid', async (request, reply) =>
    sendRead(
      request,
      reply,
      request.params.type,
      await vreadInteraction(
        fhirRequest(request),
        knownType(request.params.type),
        request.params.id,
        request.params.vid,
      ),
    ),
  );
}

/** JSON Patch by its media type; FHIRPath Patch is a Parameters resource sent as FHIR JSON. */
function patchFormat(contentType: string | undefined): PatchFormat {
  const mediaType = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (mediaType === 'application/json-patch+json') return 'json-patch';
  if (mediaType === 'application/fhir+json' || mediaType === 'application/json') return 'fhirpath-patch';
  throw new AppError(
    'unsupported-media-type',
    'PATCH takes application/json-patch+json (JSON Patch) or application/fhir+json (FHIRPath Patch Parameters)',
  );
}

/** If-None-Match: a client's stale or garbled ETag simply does not match (never an error on a read). */
function conditionalVersion(header: string): number | undefined {
  try {
    return parseETagVersion(header);
  } catch {
    return undefined;
  }
}

/**
 * Why a /fhir request matched no route: a path the router serves with other methods is 405, a path
 * naming a type that R4 does not define is 404 unknown-resource-type, anything else 404.
 */
export function unmatchedFhirRequest(path: string, isResourceType: (name: string) => boolean): AppError {
  const lacking = unsupportedOperation(path, isResourceType);
  if (lacking) return lacking;
  const segments = path.replace(/\/+$/, '').split('/').slice(2);
  if (isExportPath(segments)) return new AppError('method-not-allowed', `This method is not allowed on ${path}`);
  const [first] = segments;
  if (first === 'metadata' || first === '_history') {
    return segments.length === 1
      ? new AppError('method-not-allowed', `This method is not allowed on ${path}`)
      : new AppError('unknown-route', `No FHIR endpoint at ${path}`);
  }
  if (first !== undefined && !isResourceType(first)) {
    return new AppError('unknown-resource-type', `${first} is not a FHIR R4 resource type this server knows`);
  }
  const shape = segments
    .slice(1)
    .map((s, i) =>
      s === '_history' || s === '_search' || s === '$validate' || s === '$everything' ? s : i === 0 ? 'id' : 'vid',
    )
    .join('/');
  // `id/vid` is a compartment search (`Patient/1/Observation`), `id/$everything` Patient's operation: GET
  // only; `id/_search` and `id/vid/_search` the compartment's POST search.
  const served = [
    '',
    'id',
    '_history',
    '_search',
    '$validate',
    'id/$validate',
    'id/_history',
    'id/_history/vid',
    'id/vid',
    'id/$everything',
    'id/_search',
    'id/vid/_search',
  ];
  if (served.includes(shape)) return new AppError('method-not-allowed', `This method is not allowed on ${path}`);
  return new AppError('unknown-route', `No FHIR endpoint at ${path}`);
}

/**
 * An operation (`$name`, https://hl7.org/fhir/R4/operations.html) the server lacks, at the system,
 * type or instance level: 400 not-supported naming it (docs/api.md). `$validate` on a type or an
 * instance is served (its other methods are 405, from unmatchedFhirRequest); a path under a name that
 * is no resource type is left to the unknown-type answer.
 */
export function unsupportedOperation(path: string, isResourceType: (name: string) => boolean): AppError | undefined {
  const segments = path.replace(/\/+$/, '').split('/').slice(2);
  if (isExportPath(segments)) return undefined;
  const at = segments.findIndex((s) => s.startsWith('$'));
  if (at < 0) return undefined;
  const operation = segments[at];
  if (at === 0) return operationNotSupported(operation, 'at the system level');
  if (!isResourceType(segments[0])) return undefined;
  if (operation === '$validate' && (at === 1 || at === 2) && segments.length === at + 1) return undefined;
  if (operation === '$everything' && segments[0] === 'Patient' && at === 2 && segments.length === 3) return undefined;
  return operationNotSupported(operation, `on ${at === 1 ? segments[0] : `${segments[0]}/${segments[1]}`}`);
}
