import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { binaryFromRaw, isBinaryResource, RawContent, securityContextReference } from '../fhir/binary.js';
import { JsonLimitScanner, parseJsonBytes } from '../fhir/json-limits.js';
import type { FhirXml } from '../fhir/xml/fhir-xml.js';

const REQUEST_BODY = 'The request body';

/**
 * Parameters one form body may carry (a POST _search: a search uses at most a few dozen, see
 * search/cost-limits.ts). Counted as the bytes arrive, so a form of a million parameters is refused at the
 * 1,001st, before the rest is read or any of it is decoded.
 */
export const MAX_FORM_PARAMETERS = 1000;
const AMPERSAND = 0x26;

export const JSON_CONTENT_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir'];
/** FHIR XML bodies (https://hl7.org/fhir/R4/http.html#mime-type): read on the FHIR routes only. */
export const XML_CONTENT_TYPES = ['application/fhir+xml', 'application/xml', 'text/xml', 'application/xml+fhir'];
/** Those that name FHIR XML itself (the others are any XML). */
export const FHIR_XML_CONTENT_TYPES = ['application/fhir+xml', 'application/xml+fhir'];

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

/** A check run on each chunk of a body as it arrives; it throws (an AppError) to refuse the body there. */
type ChunkCheck = (chunk: Buffer) => void;

export function registerBodyParsers(app: FastifyInstance): void {
  // Fastify's default JSON parser is replaced so that FHIR's media types share one strict parser, which
  // checks the JSON's depth and size as it arrives (JsonLimitScanner) and parses only what passed.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(
    [...JSON_CONTENT_TYPES, 'application/json-patch+json'],
    (request: FastifyRequest, payload: Readable, done: Done) => {
      let parse = true;
      try {
        if (isBinaryContentWrite(request)) {
          assertUnencoded(request);
          // To a Binary, JSON is content like any other, unless it is a Binary resource in FHIR JSON.
          const mediaType = (contentTypeOf(request) ?? '').split(';')[0].trim().toLowerCase();
          parse = JSON_CONTENT_TYPES.includes(mediaType);
        }
      } catch (error) {
        return done(error as Error);
      }
      const scanner = parse ? new JsonLimitScanner(REQUEST_BODY) : undefined;
      readBounded(request, payload, request.routeOptions.bodyLimit, scanner && ((chunk) => scanner.feed(chunk))).then(
        (bytes) => {
          try {
            // No body (a DELETE or GET that still names a content type) is undefined: the interaction decides.
            const parsed = parse ? parseJsonBytes(bytes, REQUEST_BODY, { scanned: true }) : undefined;
            if (!isBinaryContentWrite(request)) return done(null, parsed);
            done(null, isBinaryResource(parsed) ? parsed : new RawContent(contentTypeOf(request), bytes));
          } catch (error) {
            done(error as Error);
          }
        },
        (error: Error) => done(error),
      );
    },
  );
}

/** What each kind of body is sent as (the route table's `body`, fhir/router.ts). */
const ACCEPTED: Readonly<Record<string, string>> = {
  resource:
    'application/fhir+json or application/fhir+xml (or application/json, application/xml; a Binary takes any type)',
  json: 'application/fhir+json or application/fhir+xml (or application/json, application/xml)',
  patch:
    'application/json-patch+json (JSON Patch) or application/fhir+json or application/fhir+xml (FHIRPath Patch Parameters)',
  form: 'application/x-www-form-urlencoded',
};

/** 415 naming what the route takes and what the request said (or that it said nothing). */
export function unsupportedMediaType(request: FastifyRequest): AppError {
  const body = request.routeOptions?.config?.fhirRoute?.body;
  const sent = request.headers['content-type'];
  const got = sent ? `Content-Type: ${sent.slice(0, 100)}` : 'no Content-Type';
  const accepted = body === undefined ? undefined : ACCEPTED[body];
  return new AppError(
    'unsupported-media-type',
    accepted ? `This request takes ${accepted}; it was sent with ${got}` : `Unsupported media type: ${got}`,
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
      return done(unsupportedMediaType(request));
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
    (request: FastifyRequest, payload: Readable, done: Done) => {
      const content = isBinaryContentWrite(request);
      try {
        if (content) assertUnencoded(request);
      } catch (error) {
        return done(error as Error);
      }
      readBounded(request, payload, bodyLimit, content ? undefined : formParameterCounter()).then(
        (bytes) => {
          try {
            done(null, content ? new RawContent(contentTypeOf(request), bytes) : parseForm(bytes));
          } catch (error) {
            done(error as Error);
          }
        },
        (error: Error) => done(error),
      );
    },
  );
}

/**
 * FHIR XML bodies, on the FHIR routes (fhir-routes.ts): read whole (up to the body limit), then converted
 * to FHIR JSON under the limits of a JSON body (fhir/xml/from-xml.ts), so that everything after sees
 * what a JSON body gives. To a Binary, XML is content unless it is a FHIR Binary resource.
 */
export function registerXmlBodyParser(app: FastifyInstance, xml: FhirXml): void {
  app.addContentTypeParser(XML_CONTENT_TYPES, (request: FastifyRequest, payload: Readable, done: Done) => {
    const binary = isBinaryContentWrite(request);
    try {
      if (binary) assertUnencoded(request);
    } catch (error) {
      return done(error as Error);
    }
    readBounded(request, payload, request.routeOptions.bodyLimit).then(
      (bytes) => {
        try {
          if (binary && !xml.isResourceOf(bytes, 'Binary')) done(null, new RawContent(contentTypeOf(request), bytes));
          else done(null, xml.read(bytes, REQUEST_BODY));
        } catch (error) {
          done(error as Error);
        }
      },
      (error: Error) => done(error),
    );
  });
}

/** Counts a form's parameters (its `&`s) as it arrives: 413 past MAX_FORM_PARAMETERS. */
function formParameterCounter(): ChunkCheck {
  let parameters = 1;
  return (chunk) => {
    for (let at = chunk.indexOf(AMPERSAND); at >= 0; at = chunk.indexOf(AMPERSAND, at + 1)) {
      if (++parameters > MAX_FORM_PARAMETERS) {
        throw new AppError(
          'payload-too-large',
          `A form body may carry at most ${MAX_FORM_PARAMETERS} parameters (a search uses a few dozen at most)`,
        );
      }
    }
  };
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

/**
 * The whole body, refused with 413 as soon as it passes `limit` (before reading, when Content-Length says
 * so), or as soon as `check` refuses a chunk (the rest is then never read).
 */
function readBounded(request: FastifyRequest, payload: Readable, limit: number, check?: ChunkCheck): Promise<Buffer> {
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
      try {
        check?.(bytes);
      } catch (error) {
        cleanup();
        reject(error as Error);
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
    const onError = (error: Error) => {
      cleanup();
      // An AppError is a refusal of the stream itself (the in-flight bound, http/body-budget.ts).
      reject(error instanceof AppError ? error : new AppError('bad-request', 'The request body could not be read'));
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
