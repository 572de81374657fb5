// https://hl7.org/fhir/R4/http.html#binary: a read of a Binary answers its content in its own media type,
// unless the client explicitly asks for the resource in a FHIR format (JSON or XML).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { binaryContent } from '../fhir/binary.js';
import type { FhirResponse } from '../fhir/response.js';
import { JSON_FORMATS, parseAccept, queryValue, sendFhir, startFhirReply, XML_FORMATS } from './fhir-reply.js';
import type { MediaRange } from './fhir-reply.js';

const FHIR_JSON_TYPES = new Set(['application/fhir+json', 'application/json', 'application/json+fhir']);
const FHIR_XML_TYPES = new Set(['application/fhir+xml', 'application/xml+fhir']);

/** A read or vread of a Binary: GET /fhir/Binary/{id} and /fhir/Binary/{id}/_history/{vid}. */
export function isBinaryRead(request: FastifyRequest): boolean {
  return (
    request.routeOptions?.config?.fhirRoute?.reply === 'read' &&
    (request.params as { type?: string } | undefined)?.type === 'Binary'
  );
}

/** A range naming one of `types` exactly (no wildcard), acceptable (q > 0) and, if it says, for R4. */
function names(ranges: readonly MediaRange[], types: ReadonlySet<string>): boolean {
  return ranges.some((range) => {
    const fhirVersion = range.params.get('fhirversion');
    return (
      range.q > 0 &&
      types.has(`${range.type}/${range.subtype}`) &&
      (fhirVersion === undefined || /^4\.0(\.\d+)?$/.test(fhirVersion))
    );
  });
}

/**
 * How to answer a Binary read: `resource` (the Binary in FHIR JSON or XML, as negotiated, base64 `data`)
 * when `_format` is given or Accept explicitly names a FHIR JSON or FHIR XML media type, otherwise
 * `content` (its bytes in its own media type), whatever else Accept says. `_format` overrides Accept
 * and must name JSON or XML (406 otherwise). `application/xml` alone is content: it may be the content's
 * own type (a CDA document).
 */
export function binaryRepresentation(accept: string | undefined, format: string | undefined): 'resource' | 'content' {
  if (format !== undefined) {
    const name = format.split(';')[0].trim().toLowerCase();
    if (!JSON_FORMATS.has(name) && !XML_FORMATS.has(name)) {
      throw new AppError(
        'not-acceptable',
        `_format=${format.slice(0, 100)} is not supported: this server speaks JSON and XML`,
      );
    }
    return 'resource';
  }
  const ranges = parseAccept(accept ?? '');
  return names(ranges, FHIR_JSON_TYPES) || names(ranges, FHIR_XML_TYPES) ? 'resource' : 'content';
}

/**
 * The answer to a read or vread: a Binary as its content or as the resource (binaryRepresentation), any
 * other resource in FHIR JSON or XML. Content goes out as an attachment, never rendered in the API's origin
 * (with the sandboxing Content-Security-Policy and nosniff every response has: docs/security.md).
 */
export function sendRead(
  request: FastifyRequest,
  reply: FastifyReply,
  type: string,
  response: FhirResponse,
): FastifyReply {
  if (type !== 'Binary') return sendFhir(request, reply, response);
  const header = request.headers.accept;
  const representation = binaryRepresentation(
    Array.isArray(header) ? header.join(',') : header,
    queryValue(request, '_format'),
  );
  // The answer depends on Accept: caches must not hand one client's representation to another.
  reply.header('Vary', 'Accept');
  if (representation === 'resource' || response.body === undefined) return sendFhir(request, reply, response);
  const { contentType, bytes } = binaryContent(response.body);
  startFhirReply(request, reply, response);
  reply.header('Content-Type', contentType);
  reply.header('Content-Disposition', 'attachment');
  return reply.send(bytes);
}
