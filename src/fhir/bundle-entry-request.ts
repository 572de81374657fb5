// What one entry of a batch or transaction Bundle asks for, parsed from its request.method and
// request.url (https://hl7.org/fhir/R4/bundle.html#transaction).
import { AppError } from '../errors.js';
import { parseETagVersion } from './ids.js';
import { operationNotSupported } from './routing.js';
import type { CallHeader, FhirRoute, FhirRouter } from './routing.js';
import { pathOf, queryOf } from '../url-parts.js';

/** What a Bundle entry asks for, by kind (transaction.ts plans by it), with the route that serves it. */
export type EntryAction = (
  | { kind: 'create'; type: string; ifNoneExist?: string }
  | { kind: 'update'; type: string; id: string; ifMatch?: number }
  | { kind: 'conditional-update'; type: string; query: string; ifMatch?: number }
  | { kind: 'conditional-patch'; type: string; query: string; ifMatch?: number }
  | { kind: 'patch'; type: string; id: string; ifMatch?: number }
  | { kind: 'delete'; type: string; id: string }
  | { kind: 'conditional-delete'; type: string; query: string }
  | { kind: 'read'; type: string; id: string }
  | { kind: 'vread'; type: string; id: string; versionId: string }
  | { kind: 'search'; type: string; query: string }
  | { kind: 'compartment-search'; compartment: string; id: string; type: string; query: string }
  | { kind: 'history'; type: string; id?: string; query: string }
  | { kind: 'capabilities' }
) & {
  readonly route: FhirRoute;
  readonly params: Readonly<Record<string, string>>;
  readonly query: string;
  /** The entry's request: its ifMatch, ifNoneMatch, ifNoneExist and ifModifiedSince are its headers. */
  readonly request: EntryRequest;
};

export interface EntryRequest {
  method?: unknown;
  url?: unknown;
  ifMatch?: unknown;
  ifNoneExist?: unknown;
  ifNoneMatch?: unknown;
  ifModifiedSince?: unknown;
}

/** Bundle.entry.request's fields by the header each stands for (bundle.html#transaction). */
const ENTRY_HEADERS: Partial<Record<CallHeader, keyof EntryRequest>> = {
  'if-match': 'ifMatch',
  'if-none-match': 'ifNoneMatch',
  'if-none-exist': 'ifNoneExist',
  'if-modified-since': 'ifModifiedSince',
};

/** The value of the entry's field standing for a header (ifNoneExist without a leading `?`). */
export function entryHeader(request: EntryRequest, name: CallHeader): string | undefined {
  const field = ENTRY_HEADERS[name];
  const value = field === undefined ? undefined : request[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new AppError('bad-request', `request.${field} must be a string`);
  return name === 'if-none-exist' ? value.replace(/^\?/, '') : value;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);

/** Parses an entry's request against our base URL, to the route (router.ts) that serves it. */
export function parseEntryRequest(request: EntryRequest | undefined, baseUrl: string, router: FhirRouter): EntryAction {
  if (!request || typeof request !== 'object') throw new AppError('bad-request', 'The entry has no request');
  const method = typeof request.method === 'string' ? request.method.toUpperCase() : '';
  if (!METHODS.has(method)) {
    throw new AppError(
      'bad-request',
      `request.method must be GET, HEAD, POST, PUT, PATCH or DELETE, got ${JSON.stringify(request.method ?? null)}`,
    );
  }
  if (typeof request.url !== 'string' || request.url === '')
    throw new AppError('bad-request', 'The entry has no request.url');
  let url = request.url;
  if (url.startsWith(`${baseUrl}/`)) url = url.slice(baseUrl.length + 1);
  else if (/^[a-z]+:/i.test(url)) throw new AppError('bad-request', `request.url ${url} is not on this server`);
  const query = queryOf(url);
  const segments = pathOf(url)
    .split('/')
    .filter((s) => s !== '');
  const operation = segments.find((s) => s.startsWith('$'));
  if (operation !== undefined) throw operationNotSupported(operation, 'in a Bundle entry');
  const match = router.match(method, segments);
  const known =
    match || segments.length === 0 || router.isResourceType(segments[0]) || router.methodsAt(segments).length > 0;
  if (!known) throw new AppError('bad-request', `request.url ${request.url} does not name an R4 resource type`);
  const entry = match?.route.entry;
  if (!match || !entry || (entry.query === 'none' && query !== '') || (entry.query === 'criteria' && query === ''))
    throw new AppError(
      'bad-request',
      `${method} ${request.url} is not an interaction this server supports in a Bundle`,
    );
  const { params } = match;
  const fields = {
    type: params.member ?? params.type,
    id: params.id,
    versionId: params.vid,
    compartment: params.member === undefined ? undefined : params.type,
    ifMatch: entryVersion(request),
    ifNoneExist: entryHeader(request, 'if-none-exist'),
  };
  return { kind: entry.kind, ...fields, route: match.route, params, query, request } as EntryAction;
}

function entryVersion(request: EntryRequest): number | undefined {
  const value = entryHeader(request, 'if-match');
  return value === undefined ? undefined : parseETagVersion(value);
}

/** Transaction processing order (bundle.html#transaction), by the route's method: DELETE, POST, PUT/PATCH, then GET/HEAD. */
const RANK: Readonly<Record<string, number>> = { DELETE: 0, POST: 1, PUT: 2, PATCH: 2 };

export function processingRank(action: EntryAction): number {
  return RANK[action.route.method] ?? 3;
}
