// What a route of the FHIR table (router.ts) is, and how a method and path find theirs: one matcher for
// HTTP requests that Fastify did not route (404 or 405, which operations exist) and for the requests of
// Bundle entries (https://hl7.org/fhir/R4/http.html, bundle.html#transaction).
import type { FhirAction } from '../auth/principal.js';
import { AppError } from '../errors.js';
import type { SqlExecutor } from '../storage/sql/database.js';
import type { PatchFormat } from './interactions/patch.js';
import type { FhirResponse } from './response.js';
import type { FhirRequest } from './services.js';

export type RouteMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** The R4 interaction a route is: the access line's and the metrics' name, and the CapabilityStatement's code. */
export type Interaction =
  | 'read'
  | 'vread'
  | 'update'
  | 'patch'
  | 'delete'
  | 'history-instance'
  | 'history-type'
  | 'history-system'
  | 'create'
  | 'search-type'
  | 'search-system'
  | 'search-compartment'
  | 'capabilities'
  | 'batch'
  | 'transaction'
  | 'operation';

/** What a Bundle entry on a route is (transaction.ts plans by it: order, ids, criteria). */
export type EntryKind =
  | 'create'
  | 'update'
  | 'conditional-update'
  | 'conditional-patch'
  | 'patch'
  | 'delete'
  | 'conditional-delete'
  | 'read'
  | 'vread'
  | 'search'
  | 'compartment-search'
  | 'history'
  | 'capabilities';

/** The request headers an interaction reads; a Bundle entry carries the same as request.ifMatch etc. */
export type CallHeader =
  | 'if-match'
  | 'if-none-match'
  | 'if-none-exist'
  | 'if-modified-since'
  | 'prefer'
  | 'content-type'
  | 'accept'
  | 'x-security-context';

/** One request of a route, from HTTP (http/fhir-routes.ts) or from a Bundle entry (bundle-entry.ts). */
export interface InteractionCall {
  /** The path's parameters: type, id, vid, member. */
  readonly params: Readonly<Record<string, string | undefined>>;
  /** The query string, without its `?`. */
  readonly query: string;
  header(name: CallHeader): string | undefined;
  /** The search parameters: the query's, and a POST _search form's. */
  searchParams(): [string, string][];
  /** The resource a create or update carries. */
  resource(): unknown;
  /** A PATCH's document, in its format. */
  patch(): { format: PatchFormat; document: unknown };
  /** The parsed body as sent (a Bundle, a resource to validate). */
  readonly body: unknown;
  /** A Bundle entry's: the transaction it runs in, whether only to plan, the id a create was given. */
  readonly inBundle?: { readonly executor?: SqlExecutor; readonly planOnly: boolean; readonly assignedId?: string };
  /** An asynchronous request's kick-off (router.ts asyncCapable): check the request, do not run it. */
  readonly planOnly?: boolean;
}

export interface FhirOperation {
  readonly name: string;
  readonly definition: string;
}

export interface FhirRoute {
  readonly method: RouteMethod;
  /** Below /fhir: segments, `:name` a parameter (`:type` a resource type), '' for /fhir itself. */
  readonly path: string;
  /** Absent on the export status and file URLs, which are no FHIR interaction. */
  readonly interaction?: Interaction;
  /** The CapabilityStatement's interaction codes, where they differ from `interaction`. */
  readonly capabilityCodes?: readonly Interaction[];
  /** An operation (`$name`): the CapabilityStatement lists it on the types it is served on. */
  readonly operation?: FhirOperation;
  /** `:type` only these types (an operation of one type, on a path with a parameter). */
  readonly types?: readonly string[];
  /** Allowed as a Bundle entry, as this; `criteria` says whether its query is conditional criteria. */
  readonly entry?: { readonly kind: EntryKind; readonly query: 'none' | 'criteria' | 'search' };
  /** The HTTP body: a resource (JSON or, for Binary, raw content), a search form, a patch, JSON. */
  readonly body?: 'resource' | 'form' | 'patch' | 'json';
  /** Answered as a read: a Binary answers its own content type (http/binary-reply.ts). */
  readonly reply?: 'read';
  /** Needs no token. */
  readonly public?: boolean;
  /**
   * What the caller must be allowed before the body is read (docs/security.md): each pair, where a list of
   * actions means any one of them.
   */
  readonly beforeBody?: (
    call: Pick<InteractionCall, 'params' | 'header'>,
  ) => readonly (readonly [FhirAction | readonly FhirAction[], string])[];
  /** The interaction; absent on routes another plugin serves (export, http/export-routes.ts), by `name`. */
  readonly handler?: (request: FhirRequest, call: InteractionCall) => Promise<FhirResponse>;
  /** Unique: how another plugin finds the routes it serves. */
  readonly name: string;
}

type Segment = { readonly literal: string } | { readonly param: string };

interface CompiledRoute {
  readonly route: FhirRoute;
  readonly segments: readonly Segment[];
}

export interface RouteMatch {
  readonly route: FhirRoute;
  readonly params: Readonly<Record<string, string>>;
}

/** The segments of a path below /fhir (`/fhir/Patient/1/` → ['Patient', '1']). */
export function fhirSegments(path: string): string[] {
  return path
    .replace(/^\/fhir(?=\/|$)/, '')
    .split('/')
    .filter((segment) => segment !== '');
}

/** The Fastify URL of a route. */
export function fhirUrl(route: FhirRoute): string {
  return route.path === '' ? '/fhir' : `/fhir/${route.path}`;
}

export class FhirRouter {
  private readonly compiled: readonly CompiledRoute[];
  private readonly firstLiterals: ReadonlySet<string>;

  constructor(
    readonly routes: readonly FhirRoute[],
    readonly isResourceType: (name: string) => boolean,
  ) {
    // Literal segments before parameters, as Fastify routes (`Patient/_history` is no read of id `_history`).
    const rank = (segments: readonly Segment[]) => segments.map((s) => ('literal' in s ? '0' : '1')).join('');
    this.compiled = routes
      .map((route) => ({
        route,
        segments: route.path === '' ? [] : route.path.split('/').map(segmentOf),
      }))
      .sort((a, b) => (rank(a.segments) < rank(b.segments) ? -1 : rank(a.segments) > rank(b.segments) ? 1 : 0));
    this.firstLiterals = new Set(
      this.compiled.flatMap(({ segments }) => (segments[0] && 'literal' in segments[0] ? [segments[0].literal] : [])),
    );
  }

  /** The route for a method and the path's segments (HEAD as GET), or undefined. */
  match(method: string, segments: readonly string[]): RouteMatch | undefined {
    const wanted = method === 'HEAD' ? 'GET' : method;
    for (const compiled of this.compiled) {
      if (compiled.route.method !== wanted) continue;
      const params = this.bind(compiled, segments);
      if (params) return { route: compiled.route, params };
    }
    return undefined;
  }

  /** The methods some route serves on these segments (405's Allow). */
  methodsAt(segments: readonly string[]): RouteMethod[] {
    const methods = new Set<RouteMethod>();
    for (const compiled of this.compiled) if (this.bind(compiled, segments)) methods.add(compiled.route.method);
    return [...methods];
  }

  /**
   * An operation (`$name`, https://hl7.org/fhir/R4/operations.html) no route serves where it is asked
   * for: 400 not-supported naming it (docs/api.md). A path under a name that is no resource type is left
   * to the unknown-type answer.
   */
  unsupportedOperation(segments: readonly string[], where = ''): AppError | undefined {
    const at = segments.findIndex((s) => s.startsWith('$'));
    if (at < 0 || this.methodsAt(segments).length > 0) return undefined;
    const operation = segments[at];
    if (where) return operationNotSupported(operation, where);
    if (at === 0) return operationNotSupported(operation, 'at the system level');
    if (!this.isResourceType(segments[0])) return undefined;
    return operationNotSupported(operation, `on ${at === 1 ? segments[0] : `${segments[0]}/${segments[1]}`}`);
  }

  /**
   * Why a /fhir request matched no route: an operation not served (400), a path served with other
   * methods (405, with them), a name that no R4 resource type has (404 unknown-resource-type), else 404.
   */
  unmatched(path: string): AppError {
    const segments = fhirSegments(path);
    const lacking = this.unsupportedOperation(segments);
    if (lacking) return lacking;
    const methods = this.methodsAt(segments);
    if (methods.length > 0) {
      const allow = methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
      return new AppError('method-not-allowed', `This method is not allowed on ${path}`, { headers: { Allow: allow } });
    }
    const [first] = segments;
    if (first !== undefined && !this.firstLiterals.has(first) && !this.isResourceType(first)) {
      return new AppError('unknown-resource-type', `${first} is not a FHIR R4 resource type this server knows`);
    }
    return new AppError('unknown-route', `No FHIR endpoint at ${path}`);
  }

  private bind(compiled: CompiledRoute, segments: readonly string[]): Record<string, string> | undefined {
    if (compiled.segments.length !== segments.length) return undefined;
    const params: Record<string, string> = {};
    for (let i = 0; i < segments.length; i++) {
      const pattern = compiled.segments[i];
      const segment = segments[i];
      if ('literal' in pattern) {
        if (pattern.literal !== segment) return undefined;
        continue;
      }
      // A parameter never binds an operation's name: `Patient/$everything` is no read.
      if (segment.startsWith('$')) return undefined;
      if (pattern.param === 'type') {
        if (!this.isResourceType(segment)) return undefined;
        if (compiled.route.types && !compiled.route.types.includes(segment)) return undefined;
      }
      params[pattern.param] = segment;
    }
    return params;
  }
}

function segmentOf(text: string): Segment {
  return text.startsWith(':') ? { param: text.slice(1) } : { literal: text };
}

/** An operation (`$name`) the server does not have where it is asked for: 400 not-supported naming it. */
export function operationNotSupported(operation: string, where: string): AppError {
  return new AppError('operation-not-supported', `The operation ${operation} is not supported ${where}`);
}
