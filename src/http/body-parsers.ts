import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseJsonBytes } from '../fhir/json-limits.js';

/** Strict JSON: valid UTF-8, parseable, not absurdly deep. Errors are 400s with an OperationOutcome. */
export function parseJsonBody(body: Buffer): unknown {
  // No body (a DELETE or GET that still names a content type) is undefined: the interaction decides.
  return parseJsonBytes(body, 'The request body');
}

export const JSON_CONTENT_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir'];

export function registerBodyParsers(app: FastifyInstance): void {
  // Fastify's default JSON parser is replaced so that FHIR's media types share one strict parser.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(
    [...JSON_CONTENT_TYPES, 'application/json-patch+json'],
    { parseAs: 'buffer' },
    (_request: FastifyRequest, body: Buffer, done: (err: Error | null, body?: unknown) => void) => {
      try {
        done(null, parseJsonBody(body));
      } catch (error) {
        done(error as Error);
      }
    },
  );
}
