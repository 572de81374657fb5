import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, operationOutcomeFor } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import { DatabaseUnavailableError } from '../storage/sql/database.js';
import { unsupportedMediaType } from './body-parsers.js';
import { FHIR_JSON, FHIR_XML } from './fhir-reply.js';

/** Seconds a client is asked to wait after a 503 for a lost database connection (a failover takes a few). */
const DATABASE_RETRY_AFTER_SECONDS = 2;

/**
 * The most of a refused body still on its way that is read and thrown away rather than the connection
 * closed. Fastify closes the connection when a body parser fails, but a connection closed with request
 * bytes unread is reset, and a reset can discard the answer before the client reads it: a client
 * sending a body that is too large would see EPIPE instead of the 413. Reading the rest lets the answer
 * arrive; past this many declared bytes (or a chunked body, whose end is unknown) the connection is
 * still closed.
 */
const DRAINED_BODY_BYTES = 64 * 1024 * 1024;

/** Keeps the connection open to read a refused body's rest, when its declared length is within the bound. */
function drainInsteadOfClosing(request: FastifyRequest, reply: FastifyReply): void {
  if (request.headers['transfer-encoding'] !== undefined) return;
  const declared = Number(request.headers['content-length']);
  if (declared > 0 && declared <= DRAINED_BODY_BYTES && reply.getHeader('connection') === 'close') {
    reply.removeHeader('connection');
  }
}

/** Fastify's own errors (body parsing, limits, routing) as catalog errors. */
function fromFastifyError(error: FastifyError, request: FastifyRequest): AppError {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('payload-too-large', 'The request body is larger than the server accepts');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return unsupportedMediaType(request);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('invalid-json', 'The request body is not valid JSON');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('bad-request', 'Content-Length does not match the body');
    default:
      break;
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const code: ErrorCode =
      status === 404 ? 'unknown-route' : status === 415 ? 'unsupported-media-type' : 'bad-request';
    return new AppError(code, error.message);
  }
  return new AppError('internal', 'Internal server error');
}

/** Paths whose errors use the OAuth 2.0 error shape (docs/api.md) instead of an OperationOutcome. */
export function usesOAuthErrors(url: string): boolean {
  return url.startsWith('/v1/') || url.startsWith('/.well-known/');
}

export function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  for (const [name, value] of Object.entries(error.options.headers ?? {})) reply.header(name, value);
  reply.code(error.status);
  drainInsteadOfClosing(request, reply);
  if (usesOAuthErrors(request.url)) {
    return reply
      .type('application/json; charset=utf-8')
      .send(JSON.stringify({ error: error.entry.oauthError, error_description: error.message }));
  }
  const outcome = operationOutcomeFor(error);
  // In XML where the client asked for it (fhir-reply.ts's registerFhirFormats), else JSON.
  if (request.fhirXml) return reply.type(FHIR_XML).send(request.fhirXml.write(outcome));
  return reply.type(FHIR_JSON).send(JSON.stringify(outcome));
}

/**
 * The one error handler. An AppError is answered as its catalog entry says, and Fastify's own errors
 * (body limits, content types, routing) are mapped to entries. Anything else is unexpected: a bug, a
 * corrupt stored resource, a database failure. That is a 500 with a generic message (no internals for
 * the client) and a log line with the stack. Bad input must never get here: every place that parses
 * request input throws an AppError itself, so a TypeError, RangeError or SyntaxError is always ours.
 */
export function errorHandler(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { code, statusCode } = (error ?? {}) as { code?: unknown; statusCode?: unknown };
  // Fastify and its plugins label the errors they raise (an FST_ code, an http-errors statusCode).
  const labelled =
    (typeof code === 'string' && code.startsWith('FST_')) ||
    (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500);
  const appError =
    error instanceof AppError
      ? error
      : error instanceof DatabaseUnavailableError
        ? new AppError('database-unavailable', 'The database is unavailable for a moment; retry the request', {
            headers: { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
          })
        : labelled
          ? fromFastifyError(error as FastifyError, request)
          : new AppError('internal', 'Internal server error');
  if (appError.code === 'database-unavailable') request.log.warn({ err: error }, 'database unavailable');
  else if (appError.status >= 500) request.log.error({ err: error }, 'request failed');
  return sendError(request, reply, appError);
}
