import type { FastifyReply, FastifyRequest } from 'fastify';
import { auditAccess } from '../auth/audit.js';
import { AppError } from '../errors.js';
import { preferredReturn } from '../fhir/prefer.js';
import type { PreferredReturn } from '../fhir/prefer.js';
import type { FhirResponse } from '../fhir/response.js';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';

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

/** The JSON media types this server answers in, by preference. */
const JSON_MEDIA_TYPES = ['application/fhir+json', 'application/json'] as const;

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
 * The quality the client gives a JSON media type we produce: that of its most specific matching range
 * (RFC 9110 §12.5.1), 0 when none matches. A `fhirVersion` parameter other than R4's (4.0) matches
 * nothing (https://hl7.org/fhir/R4/http.html#version-parameter).
 */
function quality(ranges: readonly MediaRange[], mediaType: string): number {
  const [type, subtype] = mediaType.split('/');
  let best: { specificity: number; q: number } | undefined;
  for (const range of ranges) {
    const fhirVersion = range.params.get('fhirversion');
    if (fhirVersion !== undefined && !/^4\.0(\.\d+)?$/.test(fhirVersion)) continue;
    let specificity: number;
    if (range.type === type && range.subtype === subtype) specificity = 3 + range.params.size;
    else if (range.type === type && range.subtype === '*') specificity = 2;
    else if (range.type === '*' && range.subtype === '*') specificity = 1;
    else continue;
    if (!best || specificity > best.specificity) best = { specificity, q: range.q };
  }
  return best?.q ?? 0;
}

/**
 * JSON only (docs/api.md): `_format` asking for anything but JSON is 406, and so is, without `_format`
 * (which overrides Accept, https://hl7.org/fhir/R4/http.html#mime-type), an Accept header that admits
 * no JSON form. No Accept, or an empty one, means anything.
 */
export function assertJsonFormat(request: FastifyRequest): void {
  const format = queryValue(request, '_format');
  if (format !== undefined) {
    if (!JSON_FORMATS.has(format.split(';')[0].trim().toLowerCase())) {
      throw new AppError('not-acceptable', `_format=${format} is not supported: this server speaks JSON only`);
    }
    return;
  }
  const header = request.headers.accept;
  const accept = (Array.isArray(header) ? header.join(',') : (header ?? '')).trim();
  if (accept === '') return;
  const ranges = parseAccept(accept);
  if (JSON_MEDIA_TYPES.some((mediaType) => quality(ranges, mediaType) > 0)) return;
  throw new AppError(
    'not-acceptable',
    `Accept: ${accept} admits no JSON form: this server answers application/fhir+json (or application/json) only`,
  );
}

function isPretty(request: FastifyRequest): boolean {
  return queryValue(request, '_pretty') === 'true';
}

function render(request: FastifyRequest, body: string | Record<string, unknown>): string {
  if (isPretty(request)) return JSON.stringify(typeof body === 'string' ? JSON.parse(body) : body, null, 2);
  return typeof body === 'string' ? body : JSON.stringify(body);
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
      return reply.type(FHIR_JSON).send(render(request, outcome));
    }
  }
  const type = response.contentType ? `${response.contentType}; charset=utf-8` : FHIR_JSON;
  return reply.type(type).send(render(request, response.body));
}
