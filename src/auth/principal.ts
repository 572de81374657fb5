// Who is calling, as the FHIR and scribe layers see it: they ask it questions and never parse tokens.

/** SMART on FHIR v2 interaction letters: c create, r read (read, vread, history), u update, d delete, s search. */
export type FhirAction = 'create' | 'read' | 'update' | 'delete' | 'search';

export interface Principal {
  readonly accountId: string;
  readonly username: string;
  readonly scopes: readonly string[];
  /** When the caller's access token expires (ms since the epoch); undefined for callers without one. */
  readonly expiresAt?: number;
  /** May this caller do `action` on resources of `type`? */
  canFhir(action: FhirAction, type: string): boolean;
  /** Has the caller this exact non-FHIR scope (scribe.read, scribe.write)? */
  hasScope(scope: string): boolean;
}

/**
 * Turns a request's Authorization header into a Principal, or throws AppError('unauthenticated') (401)
 * or AppError('rate-limited') (429). It may set headers on the reply (RateLimit-*).
 */
export interface Authenticator {
  authenticate(request: import('fastify').FastifyRequest, reply: import('fastify').FastifyReply): Promise<Principal>;
}

/**
 * The authentication part of the server as app.ts sees it (implemented in auth/): the bearer check for
 * the FHIR and scribe routes, and the routes of its own (token endpoint, JWKS).
 */
export interface AuthModule {
  readonly authenticator: Authenticator;
  registerRoutes(app: import('fastify').FastifyInstance): Promise<void>;
  close(): Promise<void>;
}
