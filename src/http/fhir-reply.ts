import type { FastifyReply, FastifyRequest } from 'fastify';
import { auditAccess } from '../auth/audit.js';
import { AppError } from '../errors.js';
import type { FhirResponse } from '../fhir/response.js';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';

/** Prefer: return=minimal | representation | OperationOutcome (https://hl7.org/fhir/R4/http.html#ops). */
export function preferredReturn(request: FastifyRequest): 'minimal' | 'representation' | 'OperationOutcome' {
  const prefer = request.headers.prefer;
  const match = /return\s*=\s*"?(minimal|representation|OperationOutcome)"?/i.exec(
    Array.isArray(prefer) ? prefer.join(',') : (prefer ?? ''),
  );
  if (!match) return 'representation';
  const value = match[1].toLowerCase();
  return value === 'minimal' ? 'minimal' : value === 'operationoutcome' ? 'OperationOutcome' : 'representation';
}

function queryValue(request: FastifyRequest, name: string): string | undefined {
  const value = (request.query as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[value.length - 1] : value;
}

const JSON_FORMATS = new Set(['json', 'application/json', 'application/fhir+json', 'application/json+fhir']);

/** _format: JSON only; asking for XML or anything else is 406 (CONTRACT.md: JSON only). */
export function assertJsonFormat(request: FastifyRequest): void {
  const format = queryValue(request, '_format');
  if (format !== undefined && !JSON_FORMATS.has(format.split(';')[0].trim().toLowerCase())) {
    throw new AppError('not-acceptable', `_format=${format} is not supported: this server speaks JSON only`);
  }
}

function isPretty(request: FastifyRequest): boolean {
  return queryValue(request, '_pretty') === 'true';
}

function render(request: FastifyRequest, body: string | Record<string, unknown>): string {
  if (isPretty(request)) return JSON.stringify(typeof body === 'string' ? JSON.parse(body) : body, null, 2);
  return typeof body === 'string' ? body : JSON.stringify(body);
}

export function sendFhir(request: FastifyRequest, reply: FastifyReply, response: FhirResponse): FastifyReply {
  if (response.accessed && response.accessed.length > 0) auditAccess(request, { ids: response.accessed });
  if (response.versionId !== undefined) reply.header('ETag', `W/"${response.versionId}"`);
  if (response.lastModified !== undefined) reply.header('Last-Modified', new Date(response.lastModified).toUTCString());
  if (response.location) {
    reply.header('Location', response.location);
    reply.header('Content-Location', response.location);
  }
  reply.code(response.status);
  if (response.status === 304 || response.body === undefined) return reply.send();
  if (response.isWrite) {
    const preference = preferredReturn(request);
    if (preference === 'minimal') return reply.send();
    if (preference === 'OperationOutcome') {
      const outcome = {
        resourceType: 'OperationOutcome',
        issue: [{ severity: 'information', code: 'informational', diagnostics: `Stored ${response.location ?? ''}` }],
      };
      return reply.type(FHIR_JSON).send(render(request, outcome));
    }
  }
  return reply.type(FHIR_JSON).send(render(request, response.body));
}
