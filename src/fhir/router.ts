// The FHIR interactions the server serves, once (https://hl7.org/fhir/R4/http.html): Fastify's routes
// (http/fhir-routes.ts, http/export-routes.ts), Bundle entries (bundle-entry-request.ts), the access
// line's and the metrics' interaction names, 404 and 405 (routing.ts) and the CapabilityStatement
// (interactions/capabilities.ts) are all derived from this table. src/fhir/router.test.ts and the
// app's start-up check (app.ts) keep them from drifting.
import { AppError } from '../errors.js';
import { VERSION } from '../version.js';
import { parseETagVersion, weakETagVersion } from './ids.js';
import { capabilityStatement } from './interactions/capabilities.js';
import { compartmentSearchInteraction } from './interactions/compartment-search.js';
import { conditionalDeleteInteraction } from './interactions/conditional-delete.js';
import { conditionalPatchInteraction } from './interactions/conditional-patch.js';
import { conditionalUpdateInteraction } from './interactions/conditional-update.js';
import { createInteraction } from './interactions/create.js';
import { deleteInteraction } from './interactions/delete.js';
import { everythingInteraction } from './interactions/everything.js';
import { historyInteraction } from './interactions/history.js';
import { patchInteraction } from './interactions/patch.js';
import { readInteraction } from './interactions/read.js';
import { searchInteraction } from './interactions/search.js';
import { bundleInteraction } from './interactions/transaction.js';
import {
  codeSystemValidateCodeInteraction,
  expandInteraction,
  lookupInteraction,
  valueSetValidateCodeInteraction,
  type OperationCall,
} from './interactions/terminology.js';
import { updateInteraction } from './interactions/update.js';
import { validateInteraction } from './interactions/validate.js';
import { versionsInteraction } from './interactions/versions.js';
import { vreadInteraction } from './interactions/vread.js';
import { readSubsetter } from './elements.js';
import { lastValues } from './query-values.js';
import { preferredReturn, preferRespondAsync, preferStrict, withoutRespondAsync } from './prefer.js';
import type { CallHeader, FhirRoute, InteractionCall } from './routing.js';
import type { FhirResponse } from './response.js';
import type { FhirRequest, SavedCall } from './services.js';

const BULK_DATA = 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition';

/** The path's type, or 404 unknown-resource-type. */
function knownType(request: FhirRequest, call: InteractionCall, param = 'type'): string {
  const type = call.params[param] ?? '';
  if (!request.services.types.isResourceType(type)) {
    throw new AppError('unknown-resource-type', `${type} is not a FHIR R4 resource type this server knows`);
  }
  return type;
}

const ifMatch = (call: InteractionCall) => {
  const value = call.header('if-match');
  return value ? parseETagVersion(value) : undefined;
};

function search(request: FhirRequest, call: InteractionCall, type: string | undefined) {
  return searchInteraction(request, type, call.searchParams(), {
    strict: preferStrict(call.header('prefer')),
    executor: call.inBundle?.executor,
    planOnly: call.planOnly || call.inBundle?.planOnly,
  });
}

function compartmentSearch(request: FhirRequest, call: InteractionCall) {
  return compartmentSearchInteraction(
    request,
    call.params.type!,
    call.params.id!,
    call.params.member ?? '*',
    call.searchParams(),
    {
      strict: preferStrict(call.header('prefer')),
      executor: call.inBundle?.executor,
      planOnly: call.planOnly || call.inBundle?.planOnly,
    },
  );
}

type Handler = (request: FhirRequest, call: InteractionCall) => Promise<FhirResponse>;

/** The headers a saved call keeps (what the search handlers read). */
const SAVED_HEADERS: readonly CallHeader[] = ['prefer', 'accept'];

/**
 * https://hl7.org/fhir/R4/async.html: with `Prefer: respond-async` the request is checked now as it would
 * be run (parameters, scopes, cost limits: their 4xx come at once) and then runs as a job of the account
 * (export/async-requests.ts): 202 and the job's status URL in Content-Location. Not inside a Bundle,
 * whose entries answer in it.
 */
function asyncCapable(name: string, handler: Handler): Handler {
  return async (request, call) => {
    const jobs = request.services.asyncRequests;
    if (!jobs || call.inBundle || !preferRespondAsync(call.header('prefer'))) return handler(request, call);
    await handler(request, { ...call, planOnly: true });
    const headers: Partial<Record<CallHeader, string>> = {};
    for (const header of SAVED_HEADERS) {
      const value = header === 'prefer' ? withoutRespondAsync(call.header(header)) : call.header(header);
      if (value !== undefined) headers[header] = value;
    }
    const saved: SavedCall = {
      route: name,
      params: call.params,
      query: call.query,
      searchParams: call.searchParams(),
      headers,
    };
    return { status: 202, contentLocation: await jobs.start(request, saved) };
  };
}

/** Runs a saved call (an asynchronous request's job) through its route's handler, as it would have run. */
export function runSavedCall(request: FhirRequest, saved: SavedCall): Promise<FhirResponse> {
  const route = FHIR_ROUTES.find((r) => r.name === saved.route);
  if (!route?.handler) throw new Error(`no route ${saved.route} to run`);
  const call: InteractionCall = {
    params: saved.params,
    query: saved.query,
    header: (name) => saved.headers[name],
    searchParams: () => saved.searchParams.map(([name, value]) => [name, value]),
    resource: () => undefined,
    patch: () => {
      throw new Error('a saved call has no body');
    },
    body: undefined,
  };
  return route.handler(request, call);
}

/**
 * The handler's answer in the representation `_summary` / `_elements` ask for (elements.ts), checked
 * before it runs. A Binary goes out whole: its content is its representation.
 */
function represented(
  handler: (request: FhirRequest, call: InteractionCall, type: string) => Promise<FhirResponse>,
  typeOf: (request: FhirRequest, call: InteractionCall) => string,
) {
  return async (request: FhirRequest, call: InteractionCall): Promise<FhirResponse> => {
    const type = typeOf(request, call);
    const shape = type === 'Binary' ? undefined : readSubsetter(request.services.types, call.query);
    const response = await handler(request, call, type);
    if (!shape || response.status !== 200 || response.body === undefined) return response;
    const text = typeof response.body === 'string' ? response.body : JSON.stringify(response.body);
    return { ...response, body: shape(text, type), sharedBody: undefined };
  };
}

function read(request: FhirRequest, call: InteractionCall) {
  const since = Date.parse(call.header('if-modified-since') ?? '');
  const ifNoneMatch = call.header('if-none-match');
  return readInteraction(request, knownType(request, call), call.params.id!, {
    // A client's stale or garbled ETag simply does not match: never an error on a read.
    ifNoneMatch: ifNoneMatch ? weakETagVersion(ifNoneMatch) : undefined,
    ifModifiedSince: Number.isNaN(since) ? undefined : since,
  });
}

function validate(request: FhirRequest, call: InteractionCall) {
  const profiles = new URLSearchParams(call.query).getAll('profile');
  return validateInteraction(request, knownType(request, call), call.body, call.params.id, profiles);
}

function history(request: FhirRequest, call: InteractionCall) {
  const type = call.params.type === undefined ? undefined : knownType(request, call);
  return historyInteraction(request, lastValues(call.query), type, call.params.id);
}

const onType =
  (...actions: ('create' | 'read' | 'update' | 'search')[]) =>
  (call: Pick<InteractionCall, 'params'>) =>
    actions.map((action) => [action, call.params.type ?? ''] as const);

const TERMINOLOGY_OPERATIONS = 'http://hl7.org/fhir/OperationDefinition';

/**
 * The terminology operations (interactions/terminology.ts), each by GET and POST: on the type and, but
 * $lookup, on an instance. Read or search on the type lets them through before the body.
 */
function terminologyRoutes(): FhirRoute[] {
  const operations = [
    { type: 'ValueSet', name: 'expand', run: expandInteraction, instance: true },
    { type: 'ValueSet', name: 'validate-code', run: valueSetValidateCodeInteraction, instance: true },
    { type: 'CodeSystem', name: 'lookup', run: lookupInteraction, instance: false },
    { type: 'CodeSystem', name: 'validate-code', run: codeSystemValidateCodeInteraction, instance: true },
  ] as const;
  return operations.flatMap(({ type, name, run, instance }) =>
    (['GET', 'POST'] as const).flatMap((method) =>
      (instance ? [false, true] : [false]).map((onInstance): FhirRoute => ({
        name: `${type}-${name}${onInstance ? '-instance' : ''}${method === 'POST' ? '-post' : ''}`,
        method,
        path: onInstance ? `${type}/:id/$${name}` : `${type}/$${name}`,
        interaction: 'operation',
        operation: { name, definition: `${TERMINOLOGY_OPERATIONS}/${type}-${name}` },
        ...(method === 'POST' ? { body: 'json' as const } : {}),
        beforeBody: () => [[['read', 'search'], type]],
        handler: async (request, call) => {
          const operationCall: OperationCall = {
            method,
            query: call.searchParams(),
            body: method === 'POST' ? call.body : undefined,
            id: onInstance ? call.params.id : undefined,
          };
          return run(request, operationCall);
        },
      })),
    ),
  );
}

/** In the order the CapabilityStatement lists interactions and operations. */
export const FHIR_ROUTES: readonly FhirRoute[] = [
  {
    name: 'capabilities',
    method: 'GET',
    path: 'metadata',
    interaction: 'capabilities',
    public: true,
    entry: { kind: 'capabilities', query: 'search' },
    handler: represented(
      async (request) => ({
        status: 200,
        body: capabilityStatement(request.services, VERSION, FHIR_ROUTES, await request.services.profiles.supported()),
        sharedBody: true,
      }),
      () => 'CapabilityStatement',
    ),
  },
  {
    // Like metadata, what a client asks before it knows how to talk to the server: no token.
    name: 'versions',
    method: 'GET',
    path: '$versions',
    interaction: 'operation',
    operation: { name: 'versions', definition: 'http://hl7.org/fhir/OperationDefinition/CapabilityStatement-versions' },
    public: true,
    handler: async (_request, call) =>
      versionsInteraction(new URLSearchParams(call.query).get('_format') ?? undefined, call.header('accept')),
  },
  {
    name: 'read',
    method: 'GET',
    path: ':type/:id',
    interaction: 'read',
    reply: 'read',
    entry: { kind: 'read', query: 'search' },
    handler: represented(read, knownType),
  },
  {
    name: 'vread',
    method: 'GET',
    path: ':type/:id/_history/:vid',
    interaction: 'vread',
    reply: 'read',
    entry: { kind: 'vread', query: 'search' },
    handler: represented(
      async (request, call, type) => vreadInteraction(request, type, call.params.id!, call.params.vid!),
      knownType,
    ),
  },
  {
    name: 'update',
    method: 'PUT',
    path: ':type/:id',
    interaction: 'update',
    body: 'resource',
    beforeBody: onType('update'),
    entry: { kind: 'update', query: 'none' },
    handler: async (request, call) =>
      updateInteraction(
        request,
        knownType(request, call),
        call.params.id!,
        call.resource(),
        ifMatch(call),
        call.header('if-none-match')?.trim() === '*',
      ),
  },
  {
    name: 'conditional-update',
    method: 'PUT',
    path: ':type',
    interaction: 'update',
    body: 'resource',
    beforeBody: onType('update', 'search'),
    entry: { kind: 'conditional-update', query: 'criteria' },
    handler: async (request, call) =>
      conditionalUpdateInteraction(request, knownType(request, call), call.query, call.resource(), ifMatch(call)),
  },
  {
    name: 'patch',
    method: 'PATCH',
    path: ':type/:id',
    interaction: 'patch',
    body: 'patch',
    beforeBody: onType('update'),
    entry: { kind: 'patch', query: 'none' },
    handler: async (request, call) => {
      const type = knownType(request, call);
      const { format, document } = call.patch();
      return patchInteraction(request, type, call.params.id!, format, document, ifMatch(call));
    },
  },
  {
    name: 'conditional-patch',
    method: 'PATCH',
    path: ':type',
    interaction: 'patch',
    body: 'patch',
    beforeBody: onType('update', 'search'),
    entry: { kind: 'conditional-patch', query: 'criteria' },
    handler: async (request, call) => {
      const type = knownType(request, call);
      const { format, document } = call.patch();
      return conditionalPatchInteraction(request, type, call.query, format, document, ifMatch(call));
    },
  },
  {
    name: 'delete',
    method: 'DELETE',
    path: ':type/:id',
    interaction: 'delete',
    entry: { kind: 'delete', query: 'none' },
    handler: async (request, call) => deleteInteraction(request, knownType(request, call), call.params.id!),
  },
  {
    name: 'conditional-delete',
    method: 'DELETE',
    path: ':type',
    interaction: 'delete',
    entry: { kind: 'conditional-delete', query: 'criteria' },
    handler: async (request, call) => conditionalDeleteInteraction(request, knownType(request, call), call.query),
  },
  {
    name: 'history-instance',
    method: 'GET',
    path: ':type/:id/_history',
    interaction: 'history-instance',
    entry: { kind: 'history', query: 'search' },
    handler: history,
  },
  {
    name: 'history-type',
    method: 'GET',
    path: ':type/_history',
    interaction: 'history-type',
    entry: { kind: 'history', query: 'search' },
    handler: history,
  },
  {
    name: 'create',
    method: 'POST',
    path: ':type',
    interaction: 'create',
    body: 'resource',
    // A conditional create (If-None-Exist) searches too.
    beforeBody: (call) =>
      onType('create', ...(call.header('if-none-exist') === undefined ? [] : (['search'] as const)))(call),
    entry: { kind: 'create', query: 'none' },
    handler: async (request, call) => {
      const assignedId = call.inBundle?.assignedId;
      return createInteraction(request, knownType(request, call), call.resource(), {
        id: assignedId,
        // A transaction resolved ifNoneExist while planning (and assigned the id); a batch entry has not.
        ifNoneExist: assignedId === undefined ? call.header('if-none-exist') : undefined,
      });
    },
  },
  {
    name: 'search-type',
    method: 'GET',
    path: ':type',
    interaction: 'search-type',
    entry: { kind: 'search', query: 'search' },
    handler: asyncCapable('search-type', async (request, call) => search(request, call, knownType(request, call))),
  },
  {
    name: 'search-type-post',
    method: 'POST',
    path: ':type/_search',
    interaction: 'search-type',
    body: 'form',
    beforeBody: onType('search'),
    handler: asyncCapable('search-type-post', async (request, call) => search(request, call, knownType(request, call))),
  },
  {
    name: 'search-compartment',
    method: 'GET',
    path: ':type/:id/:member',
    interaction: 'search-compartment',
    entry: { kind: 'compartment-search', query: 'search' },
    handler: asyncCapable('search-compartment', compartmentSearch),
  },
  {
    name: 'search-compartment-post',
    method: 'POST',
    path: ':type/:id/:member/_search',
    interaction: 'search-compartment',
    body: 'form',
    beforeBody: (call) => [['search', call.params.member ?? ''] as const],
    handler: asyncCapable('search-compartment-post', compartmentSearch),
  },
  {
    // Every member type of the compartment, as `*`.
    name: 'search-compartment-all-post',
    method: 'POST',
    path: ':type/:id/_search',
    interaction: 'search-compartment',
    body: 'form',
    handler: asyncCapable('search-compartment-all-post', compartmentSearch),
  },
  {
    name: 'batch',
    method: 'POST',
    path: '',
    interaction: 'batch',
    capabilityCodes: ['transaction', 'batch'],
    body: 'json',
    handler: async (request, call) =>
      bundleInteraction(request, call.body, { returnResources: preferredReturn(call.header('prefer')) !== 'minimal' }),
  },
  {
    name: 'history-system',
    method: 'GET',
    path: '_history',
    interaction: 'history-system',
    handler: history,
  },
  {
    name: 'search-system',
    method: 'GET',
    path: '',
    interaction: 'search-system',
    handler: asyncCapable('search-system', async (request, call) => search(request, call, undefined)),
  },
  {
    name: 'validate-type',
    method: 'POST',
    path: ':type/$validate',
    interaction: 'operation',
    operation: { name: 'validate', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate' },
    body: 'json',
    beforeBody: onType('read'),
    handler: validate,
  },
  {
    name: 'validate-instance',
    method: 'POST',
    path: ':type/:id/$validate',
    interaction: 'operation',
    operation: { name: 'validate', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate' },
    body: 'json',
    beforeBody: onType('read'),
    handler: validate,
  },
  {
    name: 'everything',
    method: 'GET',
    path: ':type/:id/$everything',
    types: ['Patient'],
    interaction: 'operation',
    operation: { name: 'everything', definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything' },
    handler: async (request, call) => everythingInteraction(request, call.params.id!, call.searchParams()),
  },
  ...terminologyRoutes(),
  // Bulk Data export (http/export-routes.ts serves these by name).
  ...(['GET', 'POST'] as const).flatMap((method): FhirRoute[] => [
    {
      name: 'export-system',
      method,
      path: '$export',
      interaction: 'operation',
      operation: { name: 'export', definition: `${BULK_DATA}/export` },
    },
    {
      name: 'export-patient',
      method,
      path: 'Patient/$export',
      interaction: 'operation',
      operation: { name: 'export', definition: `${BULK_DATA}/patient-export` },
    },
    {
      name: 'export-group',
      method,
      path: 'Group/:id/$export',
      interaction: 'operation',
      operation: { name: 'export', definition: `${BULK_DATA}/group-export` },
    },
  ]),
  // Asynchronous requests' status URLs (http/export-routes.ts serves these by name).
  { name: 'async-status', method: 'GET', path: '_async/:job' },
  { name: 'async-cancel', method: 'DELETE', path: '_async/:job' },
  { name: 'export-status', method: 'GET', path: '_export/:job' },
  { name: 'export-cancel', method: 'DELETE', path: '_export/:job' },
  { name: 'export-file', method: 'GET', path: '_export/:job/:file' },
  // The websocket channel of Subscriptions (http/subscription-routes.ts serves it).
  { name: 'subscription-websocket', method: 'GET', path: '$subscription-websocket' },
  // SMART discovery under the FHIR base (auth/smart-configuration.ts serves it).
  { name: 'smart-configuration', method: 'GET', path: '.well-known/smart-configuration', public: true },
];
