import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { auditAccess } from '../auth/audit.js';
import { AppError } from '../errors.js';
import { preferredReturn } from '../fhir/prefer.js';
import type { PreferredReturn } from '../fhir/prefer.js';
import type { FhirResponse } from '../fhir/response.js';
import type { FhirXml } from '../fhir/xml/fhir-xml.js';
import { pathOf } from '../url-parts.js';
import { FHIR_XML_CONTENT_TYPES, isBinaryContentWrite, XML_CONTENT_TYPES } from './body-parsers.js';
import { sendShared } from './compression.js';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';
export const FHIR_XML = 'application/fhir+xml; charset=utf-8';

/** Prefer: return=minimal | representation | OperationOutcome (https://hl7.org/fhir/R4/http.html#ops). */
export function requestPreferredReturn(request: FastifyRequest): PreferredReturn {
  const prefer = request.headers.prefer;
  return preferredReturn(Array.isArray(prefer) ? prefer.join(',') : prefer);
}

export function queryValue(request: FastifyRequest, name: string): string | undefined {
  const value = (request.query as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[value.length - 1] : value;
}

export const JSON_FORMATS = new Set(['json', 'application/json', 'application/fhir+json', 'application/json+fhir']);
/** `_format` values meaning XML (https://hl7.org/fhir/R4/http.html#mime-type). */
export const XML_FORMATS = new Set([
  'xml',
  'text/xml',
  'application/xml',
  'application/fhir+xml',
  'application/xml+fhir',
]);

export type FhirFormat = 'json' | 'xml';

/** The media types this server answers in, each with its format, in the server's order of preference. */
const MEDIA_TYPES: readonly (readonly [string, FhirFormat])[] = [
  ['application/fhir+json', 'json'],
  ['application/json', 'json'],
  ['application/fhir+xml', 'xml'],
  ['application/xml', 'xml'],
  ['text/xml', 'xml'],
  ['application/xml+fhir', 'xml'],
];

export interface MediaRange {
  readonly type: string;
  readonly subtype: string;
  readonly params: ReadonlyMap<string, string>;
  readonly q: number;
}

export function parseAccept(accept: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  for (const item of accept.split(',')) {
    const [mediaType, ...rawParams] = item.split(';').map((part) => part.trim());
    const slash = mediaType.indexOf('/');
    if (slash < 0) continue;
    const params = new Map<string, string>();
    let q = 1;
    for (const param of rawParams) {
      const eq = param.indexOf('=');
      if (eq < 0) continue;
      const name = param.slice(0, eq).trim().toLowerCase();
      const value = param
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1');
      if (name === 'q') q = Number.isNaN(Number(value)) ? 0 : Math.min(1, Math.max(0, Number(value)));
      else params.set(name, value);
    }
    const type = mediaType.slice(0, slash).toLowerCase();
    ranges.push({ type, subtype: mediaType.slice(slash + 1).toLowerCase(), params, q });
  }
  return ranges;
}

/**
 * The quality the client gives a media type we produce: that of its most specific matching range (RFC
 * 9110 §12.5.1), with that range's place in the header; q 0 when none matches. A `fhirVersion` parameter
 * other than R4's (4.0) matches nothing (https://hl7.org/fhir/R4/http.html#version-parameter).
 */
function quality(ranges: readonly MediaRange[], mediaType: string): { q: number; at: number } {
  const [type, subtype] = mediaType.split('/');
  let best: { specificity: number; q: number; at: number } | undefined;
  ranges.forEach((range, at) => {
    const fhirVersion = range.params.get('fhirversion');
    if (fhirVersion !== undefined && !/^4\.0(\.\d+)?$/.test(fhirVersion)) return;
    let specificity: number;
    if (range.type === type && range.subtype === subtype) specificity = 3 + range.params.size;
    else if (range.type === type && range.subtype === '*') specificity = 2;
    else if (range.type === '*' && range.subtype === '*') specificity = 1;
    else return;
    if (!best || specificity > best.specificity) best = { specificity, q: range.q, at };
  });
  return best ?? { q: 0, at: 0 };
}

/** The format to answer in, or why the client accepts neither (406). */
export type Negotiated = { readonly format: FhirFormat } | { readonly refused: string };

/**
 * JSON or XML (docs/fhir.md): `_format` overrides Accept (https://hl7.org/fhir/R4/http.html#mime-type);
 * otherwise the media type with the highest quality, the earlier range in the header on a tie. No Accept
 * (or an empty one), and a tie on one range (`*\/*`), go to `preferred`: the request body's format.
 */
export function negotiateFormat(
  format: string | undefined,
  accept: string | undefined,
  preferred: FhirFormat = 'json',
): Negotiated {
  if (format !== undefined) {
    const name = format.split(';')[0].trim().toLowerCase();
    if (JSON_FORMATS.has(name)) return { format: 'json' };
    if (XML_FORMATS.has(name)) return { format: 'xml' };
    return {
      refused: `_format=${format.slice(0, 100)} is not supported: this server speaks JSON (json) and XML (xml)`,
    };
  }
  const header = (accept ?? '').trim();
  if (header === '') return { format: preferred };
  // A client sends the same Accept with every request: its answer is remembered (a few dozen kept).
  const key = `${preferred} ${header}`;
  let known = recentAccepts.get(key);
  if (!known) {
    known = negotiateAccept(header, preferred);
    if (key.length <= 200) {
      if (recentAccepts.size >= RECENT_ACCEPTS) recentAccepts.clear();
      recentAccepts.set(key, known);
    }
  }
  return known;
}

const RECENT_ACCEPTS = 64;
const recentAccepts = new Map<string, Negotiated>();

function negotiateAccept(header: string, preferred: FhirFormat): Negotiated {
  const ranges = parseAccept(header);
  let best: { format: FhirFormat; q: number; at: number } | undefined;
  for (const [mediaType, candidate] of MEDIA_TYPES) {
    const { q, at } = quality(ranges, mediaType);
    if (q === 0) continue;
    const better =
      !best || q > best.q || (q === best.q && (at < best.at || (at === best.at && candidate === preferred)));
    if (better) best = { format: candidate, q, at };
  }
  if (best) return { format: best.format };
  return {
    refused: `Accept: ${header.slice(0, 200)} admits neither JSON nor XML: this server answers application/fhir+json (or application/json) and application/fhir+xml (or application/xml)`,
  };
}

function acceptHeader(request: FastifyRequest): string | undefined {
  const header = request.headers.accept;
  return Array.isArray(header) ? header.join(',') : header;
}

/**
 * The format of the request's body, by its Content-Type: XML for the XML media types, else JSON. To a
 * Binary, plain XML (`application/xml`, `text/xml`) is content like any other: only FHIR XML's own
 * media type says the body is FHIR.
 */
function bodyFormat(request: FastifyRequest): FhirFormat {
  const contentType = request.headers['content-type'];
  if (contentType === undefined) return 'json';
  const mediaType = contentType.split(';')[0].trim().toLowerCase();
  if (!XML_CONTENT_TYPES.includes(mediaType)) return 'json';
  return !isBinaryContentWrite(request) || FHIR_XML_CONTENT_TYPES.includes(mediaType) ? 'xml' : 'json';
}

declare module 'fastify' {
  interface FastifyRequest {
    /** On the routes that answer FHIR JSON or XML: what the client accepts (registerFhirFormats). */
    fhirFormat?: Negotiated;
    /** Set when the answer is FHIR XML (errors included), with the codec that writes it. */
    fhirXml?: FhirXml;
  }
}

/**
 * Negotiates the format once per request, before authentication (so that a 401 is in the client's
 * format too), on the routes this server answers in JSON or XML: those of fhir-routes.ts, and unknown
 * /fhir paths (404, 405). The export routes speak JSON only (Bulk Data). The 406 itself comes later,
 * from the route (assertAcceptable): a Binary read may answer its own media type.
 */
export function registerFhirFormats(app: FastifyInstance, xml: FhirXml): void {
  app.decorateRequest('fhirFormat', undefined);
  app.decorateRequest('fhirXml', undefined);
  app.addHook('onRequest', async (request) => {
    const route = request.routeOptions.config?.fhirRoute;
    const answersFhir = route ? route.handler !== undefined : request.is404 && isFhirPath(pathOf(request.url));
    if (!answersFhir) return;
    const negotiated = negotiateFormat(queryValue(request, '_format'), acceptHeader(request), bodyFormat(request));
    request.fhirFormat = negotiated;
    if ('format' in negotiated && negotiated.format === 'xml') request.fhirXml = xml;
  });
}

function isFhirPath(path: string): boolean {
  return path === '/fhir' || path.startsWith('/fhir/');
}

/** 406 when the client accepts neither JSON nor XML (registerFhirFormats). */
export function assertAcceptable(request: FastifyRequest): void {
  const negotiated = request.fhirFormat;
  if (negotiated && 'refused' in negotiated) throw new AppError('not-acceptable', negotiated.refused);
}

/**
 * JSON only, for the routes that speak nothing else (Bulk Data export): `_format` other than JSON, or
 * an Accept that admits no JSON form, is 406. No Accept, or an empty one, means anything.
 */
export function assertJsonFormat(request: FastifyRequest): void {
  const format = queryValue(request, '_format');
  if (format !== undefined) {
    if (!JSON_FORMATS.has(format.split(';')[0].trim().toLowerCase())) {
      throw new AppError('not-acceptable', `_format=${format.slice(0, 100)} is not supported here: JSON only`);
    }
    return;
  }
  const accept = (acceptHeader(request) ?? '').trim();
  if (accept === '') return;
  const ranges = parseAccept(accept);
  if (MEDIA_TYPES.some(([mediaType, format]) => format === 'json' && quality(ranges, mediaType).q > 0)) return;
  throw new AppError(
    'not-acceptable',
    `Accept: ${accept.slice(0, 200)} admits no JSON form: this endpoint answers application/fhir+json (or application/json) only`,
  );
}

function isPretty(request: FastifyRequest): boolean {
  return queryValue(request, '_pretty') === 'true';
}

/** The body in the negotiated format: [content type, text]. */
/** The request's `_format` and `_pretty`, which a Bundle's links carry on (withCarriedParams). */
function carriedParams(request: FastifyRequest): string {
  const query = request.query as Record<string, unknown>;
  if (query._format === undefined && query._pretty === undefined) return '';
  const carried = new URLSearchParams();
  for (const name of ['_format', '_pretty']) {
    const value = queryValue(request, name);
    if (value !== undefined) carried.set(name, value);
  }
  return carried.toString();
}

/**
 * A Bundle whose links (self, next, ...) carry the request's `_format` and `_pretty`, so that a client
 * that chose its format with them gets every page in it (the links are built from the search alone).
 */
function withCarriedParams(body: Record<string, unknown>, carried: string): Record<string, unknown> {
  if (body.resourceType !== 'Bundle' || !Array.isArray(body.link)) return body;
  const link = (body.link as { url?: unknown }[]).map((entry) => {
    if (typeof entry.url !== 'string' || /[?&]_(format|pretty)=/.test(entry.url)) return entry;
    return { ...entry, url: `${entry.url}${entry.url.includes('?') ? '&' : '?'}${carried}` };
  });
  return { ...body, link };
}

/** The body in the negotiated format: [content type, text]. A plain JSON answer is sent as it is. */
function render(request: FastifyRequest, body: string | Record<string, unknown>): [string, string] {
  const pretty = isPretty(request);
  const carried = carriedParams(request);
  if (!request.fhirXml && !pretty && carried === '') {
    return [FHIR_JSON, typeof body === 'string' ? body : JSON.stringify(body)];
  }
  let parsed = typeof body === 'string' ? (JSON.parse(body) as Record<string, unknown>) : body;
  if (carried !== '') parsed = withCarriedParams(parsed, carried);
  if (request.fhirXml) return [FHIR_XML, request.fhirXml.write(parsed, pretty)];
  return [FHIR_JSON, pretty ? JSON.stringify(parsed, null, 2) : JSON.stringify(parsed)];
}

/** What every answer to an interaction carries whatever its body: the audit line, status and version headers. */
export function startFhirReply(request: FastifyRequest, reply: FastifyReply, response: FhirResponse): void {
  if (response.accessed && response.accessed.length > 0) auditAccess(request, { ids: response.accessed });
  if (response.versionId !== undefined) reply.header('ETag', `W/"${response.versionId}"`);
  if (response.lastModified !== undefined) reply.header('Last-Modified', new Date(response.lastModified).toUTCString());
  if (response.location) {
    reply.header('Location', response.location);
    reply.header('Content-Location', response.location);
  }
  if (response.contentLocation) reply.header('Content-Location', response.contentLocation);
  reply.code(response.status);
}

export function sendFhir(request: FastifyRequest, reply: FastifyReply, response: FhirResponse): FastifyReply {
  startFhirReply(request, reply, response);
  if (response.status === 304 || response.body === undefined) return reply.send();
  if (response.isWrite) {
    const preference = requestPreferredReturn(request);
    if (preference === 'minimal') return reply.send();
    if (preference === 'OperationOutcome') {
      const outcome = {
        resourceType: 'OperationOutcome',
        issue: [{ severity: 'information', code: 'informational', diagnostics: `Stored ${response.location ?? ''}` }],
      };
      const [type, text] = render(request, outcome);
      return reply.type(type).send(text);
    }
  }
  // A body that is no FHIR resource ($versions' plain object) goes out as JSON whatever was negotiated.
  if (response.contentType) {
    const body =
      typeof response.body === 'string'
        ? response.body
        : JSON.stringify(response.body, null, isPretty(request) ? 2 : 0);
    return reply.type(`${response.contentType}; charset=utf-8`).send(body);
  }
  const [type, text] = render(request, response.body);
  // Sent as the interaction made it (no XML, no pretty printing, no parameters carried into it).
  if (response.sharedBody && text === response.body)
    return sendShared(request, reply, type, text) ?? reply.type(type).send(text);
  return reply.type(type).send(text);
}
