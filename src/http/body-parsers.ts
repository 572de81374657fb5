import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { binaryFromRaw, isBinaryResource, RawContent, securityContextReference } from '../fhir/binary.js';
import { parseJsonBytes } from '../fhir/json-limits.js';

/** Strict JSON: valid UTF-8, parseable, not absurdly deep. Errors are 400s with an OperationOutcome. */
export function parseJsonBody(body: Buffer): unknown {
  // No body (a DELETE or GET that still names a content type) is undefined: the interaction decides.
  return parseJsonBytes(body, 'The request body');
}

export const JSON_CONTENT_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir'];

type Done = (err: Error | null, body?: unknown) => void;

/**
 * A create or update of a Binary (POST /fhir/Binary, PUT /fhir/Binary/{id}, conditional PUT
 * /fhir/Binary?...), whose body may be any content (https://hl7.org/fhir/R4/http.html#binary). Known
 * from the route, which Fastify has matched before it parses the body.
 */
export function isBinaryContentWrite(request: FastifyRequest): boolean {
  const route = request.routeOptions?.url;
  const isWriteRoute =
    (request.method === 'POST' && route === '/fhir/:type') ||
    (request.method === 'PUT' && (route === '/fhir/:type' || route === '/fhir/:type/:id'));
  return isWriteRoute && (request.params as { type?: string } | undefined)?.type === 'Binary';
}

function contentTypeOf(request: FastifyRequest): string | undefined {
  return request.headers['content-type'];
}

/**
 * Raw content is stored as it arrives: request bodies are never decoded (http/compression.ts), so a
 * body with a Content-Encoding would be stored encoded under a type that does not describe it (415,
 * RFC 9110 §15.5.16).
 */
function assertUnencoded(request: FastifyRequest): void {
  const encoding = request.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    throw new AppError(
      'unsupported-media-type',
      `Content-Encoding: ${encoding} is not supported on a request: send the content as it is`,
    );
  }
}

function rawContent(request: FastifyRequest, bytes: Buffer): RawContent {
  assertUnencoded(request);
  return new RawContent(contentTypeOf(request), bytes);
}

export function registerBodyParsers(app: FastifyInstance): void {
  // Fastify's default JSON parser is replaced so that FHIR's media types share one strict parser.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(
    [...JSON_CONTENT_TYPES, 'application/json-patch+json'],
    { parseAs: 'buffer' },
    (request: FastifyRequest, body: Buffer, done: Done) => {
      try {
        if (!isBinaryContentWrite(request)) return done(null, parseJsonBody(body));
        assertUnencoded(request);
        // To a Binary, JSON is content like any other, unless it is a Binary resource in FHIR JSON.
        const mediaType = (contentTypeOf(request) ?? '').split(';')[0].trim().toLowerCase();
        const parsed = JSON_CONTENT_TYPES.includes(mediaType) ? parseJsonBody(body) : undefined;
        done(null, isBinaryResource(parsed) ? parsed : rawContent(request, body));
      } catch (error) {
        done(error as Error);
      }
    },
  );
}

/**
 * The FHIR routes' parsers for raw content (registered inside them, so that the rest of the API keeps
 * its own): any content type on a Binary write is read as it is, up to `bodyLimit` bytes; on every
 * other route a content type without a parser stays a 415, answered before the body is read.
 */
export function registerRawContentParsers(app: FastifyInstance, bodyLimit: number): void {
  app.addContentTypeParser('*', (request: FastifyRequest, payload: Readable, done: Done) => {
    if (!isBinaryContentWrite(request)) {
      return done(new AppError('unsupported-media-type', 'Unsupported Content-Type: send application/fhir+json'));
    }
    try {
      assertUnencoded(request);
    } catch (error) {
      return done(error as Error);
    }
    readBounded(request, payload, bodyLimit).then(
      (bytes) => done(null, new RawContent(contentTypeOf(request), bytes)),
      (error: Error) => done(error),
    );
  });
  // A form body is a search's parameters (POST _search), or, sent to a Binary, content.
  app.removeContentTypeParser('application/x-www-form-urlencoded');
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'buffer', bodyLimit },
    (request: FastifyRequest, body: Buffer, done: Done) => {
      try {
        done(null, isBinaryContentWrite(request) ? rawContent(request, body) : parseForm(body));
      } catch (error) {
        done(error as Error);
      }
    },
  );
}

/** name → value, or values when repeated: the shape @fastify/formbody gives the rest of the API. */
export function parseForm(body: Buffer): Record<string, string | string[]> {
  const fields: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  for (const [name, value] of new URLSearchParams(body.toString('utf8'))) {
    const existing = fields[name];
    fields[name] = existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
  }
  return fields;
}

/** The whole body, refused with 413 as soon as it passes `limit` (before reading, when Content-Length says so). */
function readBounded(request: FastifyRequest, payload: Readable, limit: number): Promise<Buffer> {
  const tooLarge = () => new AppError('payload-too-large', 'The request body is larger than the server accepts');
  const declared = Number(request.headers['content-length']);
  if (declared > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const cleanup = () => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
    };
    const onData = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      received += bytes.length;
      if (received > limit) {
        cleanup();
        reject(tooLarge());
        return;
      }
      chunks.push(bytes);
    };
    const onEnd = () => {
      cleanup();
      if (!Number.isNaN(declared) && declared !== received) {
        reject(new AppError('bad-request', 'Content-Length does not match the body'));
        return;
      }
      resolve(Buffer.concat(chunks, received));
    };
    const onError = () => {
      cleanup();
      reject(new AppError('bad-request', 'The request body could not be read'));
    };
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.resume();
  });
}

/**
 * The resource a create or update sends: the parsed FHIR JSON, or, for raw content sent to a Binary,
 * the Binary that holds it (X-Security-Context naming its securityContext).
 */
export function requestResource(
  request: FastifyRequest,
  isResourceType: (name: string) => boolean,
  id?: string,
): unknown {
  if (!(request.body instanceof RawContent)) return request.body;
  const header = request.headers['x-security-context'];
  const securityContext = securityContextReference(Array.isArray(header) ? header[0] : header, isResourceType);
  return binaryFromRaw(request.body, securityContext, id);
}
