// Request ids (docs/api.md "Running it"): a well-formed incoming `X-Request-Id` is kept, so that a proxy's
// or a client's id follows the request through our logs; anything else (absent, too long, characters that
// could forge log fields or headers) is replaced by a fresh UUID. The id is echoed in the response header
// and carried by every log line of the request as `req_id`.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

export const REQUEST_ID_HEADER = 'x-request-id';

/** The one log field name of the request id (Fastify's `requestIdLogLabel`, the audit lines, the access line). */
export const REQUEST_ID_LOG_FIELD = 'req_id';

/** 1 to 128 characters of letters, digits and `.`, `_`, `:`, `-` (UUIDs, ULIDs, W3C trace ids, AWS ids). */
const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

export function isWellFormedRequestId(value: unknown): value is string {
  return typeof value === 'string' && WELL_FORMED.test(value);
}

/** Fastify's `genReqId`: the incoming id when well formed (a repeated header arrives joined by ", ": replaced). */
export function requestIdFor(request: IncomingMessage): string {
  const incoming = request.headers[REQUEST_ID_HEADER];
  return isWellFormedRequestId(incoming) ? incoming : randomUUID();
}

/** Echoes the id on every reply (errors and 404s too: onSend runs for each of them). */
export function registerRequestIdHeader(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('X-Request-Id', request.id);
    done(null, payload);
  });
}
