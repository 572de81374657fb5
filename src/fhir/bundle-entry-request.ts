// What one entry of a batch or transaction Bundle asks for, parsed from its request.method and
// request.url (https://hl7.org/fhir/R4/bundle.html#transaction).
import { AppError } from '../errors.js';

export type EntryAction =
  | { kind: 'create'; type: string; ifNoneExist?: string }
  | { kind: 'update'; type: string; id: string; ifMatch?: number }
  | { kind: 'conditional-update'; type: string; query: string; ifMatch?: number }
  | { kind: 'patch'; type: string; id: string; ifMatch?: number }
  | { kind: 'delete'; type: string; id: string }
  | { kind: 'conditional-delete'; type: string; query: string }
  | { kind: 'read'; type: string; id: string; ifNoneMatch?: number }
  | { kind: 'vread'; type: string; id: string; versionId: string }
  | { kind: 'search'; type: string; query: string }
  | { kind: 'compartment-search'; compartment: string; id: string; type: string; query: string }
  | { kind: 'history'; type: string; id?: string; query: string }
  | { kind: 'capabilities' };

export interface EntryRequest {
  method?: unknown;
  url?: unknown;
  ifMatch?: unknown;
  ifNoneExist?: unknown;
  ifNoneMatch?: unknown;
}

function version(header: unknown, name: string): number | undefined {
  if (header === undefined) return undefined;
  const match = typeof header === 'string' ? /^\s*(?:W\/)?"?([1-9][0-9]{0,9})"?\s*$/.exec(header) : null;
  if (!match) throw new AppError('bad-request', `${name} must be an ETag like W/"1"`);
  return Number(match[1]);
}

/** Parses an entry's request against our base URL; `isType` says which names are resource types. */
export function parseEntryRequest(
  request: EntryRequest | undefined,
  baseUrl: string,
  isType: (name: string) => boolean,
): EntryAction {
  if (!request || typeof request !== 'object') throw new AppError('bad-request', 'The entry has no request');
  const method = typeof request.method === 'string' ? request.method.toUpperCase() : '';
  if (typeof request.url !== 'string' || request.url === '')
    throw new AppError('bad-request', 'The entry has no request.url');
  let url = request.url;
  if (url.startsWith(`${baseUrl}/`)) url = url.slice(baseUrl.length + 1);
  else if (/^[a-z]+:/i.test(url)) throw new AppError('bad-request', `request.url ${url} is not on this server`);
  url = url.replace(/^\/+/, '');
  const at = url.indexOf('?');
  const path = at < 0 ? url : url.slice(0, at);
  const query = at < 0 ? '' : url.slice(at + 1);
  const segments = path.split('/').filter((s) => s !== '');
  const operation = segments.find((s) => s.startsWith('$'));
  if (operation !== undefined) throw operationNotSupported(operation, 'in a Bundle entry');
  if (segments.length === 1 && segments[0] === 'metadata' && (method === 'GET' || method === 'HEAD')) {
    return { kind: 'capabilities' };
  }
  const [type, id, third, vid] = segments;
  if (!type || !isType(type))
    throw new AppError('bad-request', `request.url ${request.url} does not name an R4 resource type`);
  const ifMatch = version(request.ifMatch, 'ifMatch');
  const shape =
    segments.length === 1
      ? 'type'
      : segments.length === 2
        ? id === '_history'
          ? 'type-history'
          : 'instance'
        : segments.length === 3 && third === '_history'
          ? 'instance-history'
          : segments.length === 4 && third === '_history'
            ? 'version'
            : segments.length === 3
              ? 'compartment'
              : 'other';

  switch (method) {
    case 'POST':
      if (shape === 'type' && query === '') {
        return {
          kind: 'create',
          type,
          ifNoneExist: typeof request.ifNoneExist === 'string' ? request.ifNoneExist.replace(/^\?/, '') : undefined,
        };
      }
      break;
    case 'PUT':
      if (shape === 'instance' && query === '') return { kind: 'update', type, id, ifMatch };
      if (shape === 'type' && query !== '') return { kind: 'conditional-update', type, query, ifMatch };
      break;
    case 'PATCH':
      if (shape === 'instance' && query === '') return { kind: 'patch', type, id, ifMatch };
      break;
    case 'DELETE':
      if (shape === 'instance' && query === '') return { kind: 'delete', type, id };
      if (shape === 'type' && query !== '') return { kind: 'conditional-delete', type, query };
      break;
    case 'GET':
    case 'HEAD':
      if (shape === 'instance')
        return { kind: 'read', type, id, ifNoneMatch: version(request.ifNoneMatch, 'ifNoneMatch') };
      if (shape === 'version') return { kind: 'vread', type, id, versionId: vid };
      if (shape === 'type') return { kind: 'search', type, query };
      if (shape === 'compartment') return { kind: 'compartment-search', compartment: type, id, type: third, query };
      if (shape === 'type-history') return { kind: 'history', type, query };
      if (shape === 'instance-history') return { kind: 'history', type, id, query };
      break;
    default:
      throw new AppError(
        'bad-request',
        `request.method must be GET, HEAD, POST, PUT, PATCH or DELETE, got ${JSON.stringify(request.method ?? null)}`,
      );
  }
  throw new AppError('bad-request', `${method} ${request.url} is not an interaction this server supports in a Bundle`);
}

/** An operation (`$name`) the server does not have where it is asked for: 400 not-supported naming it. */
export function operationNotSupported(operation: string, where: string): AppError {
  return new AppError('operation-not-supported', `The operation ${operation} is not supported ${where}`);
}

/** Transaction processing order (bundle.html#transaction): DELETE, POST, PUT/PATCH, then GET/HEAD. */
export function processingRank(action: EntryAction): number {
  switch (action.kind) {
    case 'delete':
    case 'conditional-delete':
      return 0;
    case 'create':
      return 1;
    case 'update':
    case 'conditional-update':
    case 'patch':
      return 2;
    default:
      return 3;
  }
}
