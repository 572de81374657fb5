// The access line: exactly one JSON log line per request, written once the response has been sent, with
// stable field names. It replaces Fastify's "incoming request" / "request completed" pair (turned off in
// buildApp) and the audit trail's former separate access line: an authenticated request's line is also its
// audit record (`audit: true`, the account, the resource type and the ids read or written). Never the
// query string, a header, a token or a body: searches put patient names and codes in the query, and a
// misdirected token request puts a password there.
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { accessDetailsOf, principalOf } from '../auth/audit.js';
import { clientAddress } from '../auth/transport.js';
import { fhirInteraction } from './fhir-interaction.js';
import { pathOf } from '../url-parts.js';
import { REQUEST_ID_LOG_FIELD } from './request-id.js';

/** The fields of a request's access line (registerAccessLog adds `req_id`). */
export function accessLineFields(request: FastifyRequest, reply: FastifyReply): Record<string, unknown> {
  const principal = principalOf(request);
  const details = accessDetailsOf(request);
  const fields: Record<string, unknown> = {
    event: 'access',
    method: request.method,
    path: pathOf(request.url),
    route: request.routeOptions?.url,
    interaction: details?.interaction ?? fhirInteraction(request),
    status: reply.statusCode,
    duration_ms: Math.round(reply.elapsedTime * 100) / 100,
    client: clientAddress(request),
  };
  if (!principal) return fields;
  const params = (request.params ?? {}) as Record<string, unknown>;
  return {
    audit: true,
    ...fields,
    account_id: principal.accountId,
    username: principal.username,
    resource_type: details?.resourceType ?? (typeof params.type === 'string' ? params.type : undefined),
    ids: details?.ids ?? (typeof params.id === 'string' ? [params.id] : undefined),
    outcome: reply.statusCode < 400 ? 'success' : 'failure',
  };
}

export function registerAccessLog(app: FastifyInstance): void {
  // Through the server's logger, with the request's id among the fields: a request that logs nothing
  // else never makes its own logger (request-logger.ts).
  const log = app.log as FastifyBaseLogger & { isLevelEnabled?(level: string): boolean };
  app.addHook('onResponse', (request, reply, done) => {
    if (log.isLevelEnabled?.('info') !== false) {
      log.info({ [REQUEST_ID_LOG_FIELD]: request.id, ...accessLineFields(request, reply) }, 'access');
    }
    done();
  });
}
