// Everything behind a token, as one encapsulated Fastify scope (https://fastify.dev/docs/latest/Reference/Encapsulation/):
// its onRequest hook authenticates every request of every route registered inside it, before any body is
// read, except routes marked `public` (the CapabilityStatement, 405 answers). The FHIR routes, the export
// routes and the scribe API are registered inside; the token endpoint and discovery documents outside.
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Authenticator, Principal } from '../auth/principal.js';
import type { ReadBudget } from '../storage/sql/database.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Needs no token. */
    public?: boolean;
  }
  interface FastifyRequest {
    /** Who is asking: set by the authenticated scope's hook (undefined on public routes). */
    principal?: Principal;
    /** The time this request's searches may take, and the signal that the client went away (fhir-routes.ts). */
    readBudget?: ReadBudget;
  }
}

export interface AuthenticatedOptions {
  readonly authenticator: Authenticator;
  /** Registers the routes that need a token, inside the scope. */
  readonly routes: FastifyPluginAsync;
}

export async function authenticatedScope(app: FastifyInstance, options: AuthenticatedOptions): Promise<void> {
  app.decorateRequest('principal', undefined);
  app.decorateRequest('readBudget', undefined);
  app.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.config.public) return;
    request.principal = await options.authenticator.authenticate(request, reply);
  });
  await app.register(options.routes);
}
