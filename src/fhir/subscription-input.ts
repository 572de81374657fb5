// What a client may write as a Subscription (https://hl7.org/fhir/R4/subscription.html, docs/subscriptions.md),
// checked with the rest of the resource's validation (resource-input.ts) so that a refusal is the
// invalid-resource status and nothing is stored. The server takes it as `requested` and activates it
// (subscriptions/dispatcher.ts); `off` (and `error`) stop it.
import { AppError } from '../errors.js';
import type { FhirResource } from '../storage/store.js';
import type { ValidationIssue } from '../validation/validate.js';
import { requireAccess } from './access.js';
import type { FhirRequest } from './services.js';

const SUBSCRIPTION_CHANNELS = ['rest-hook', 'websocket'] as const;
/** The one payload a rest-hook may ask for: the resource, PUT to the endpoint as a FHIR base. */
export const SUBSCRIPTION_PAYLOAD = 'application/fhir+json';
const MAX_SUBSCRIPTION_HEADERS = 20;
const MAX_HEADER_LENGTH = 4096;
const MAX_ENDPOINT_LENGTH = 2048;
const MAX_CRITERIA_LENGTH = 4096;

/** Parameters that shape a search's answer, not what matches: meaningless in criteria. */
const RESULT_PARAMETERS = new Set([
  '_sort',
  '_count',
  '_include',
  '_revinclude',
  '_summary',
  '_elements',
  '_total',
  '_contained',
  '_containedType',
  '_format',
  '_pretty',
  '_page',
  '_type',
]);

/** Headers the delivery sets itself, or that would change how the request is framed or routed. */
const RESERVED_HEADER =
  /^(host|content-length|content-type|content-encoding|transfer-encoding|connection|keep-alive|upgrade|te|trailer|expect|proxy-.*|forwarded|x-forwarded-.*|x-original-url|x-rewrite-url|x-http-method-override|x-http-method|x-method-override)$/i;
/** A header line: a token, then a value of visible ASCII, spaces and tabs (what every HTTP client sends as is). */
const HEADER_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([\t\x20-\x7e]*)$/;

/** `Type?query` split; undefined when there is no type in front. */
export function splitCriteria(criteria: string): { type: string; query: string } | undefined {
  const mark = criteria.indexOf('?');
  const type = mark < 0 ? criteria : criteria.slice(0, mark);
  if (!/^[A-Z][A-Za-z]+$/.test(type)) return undefined;
  return { type, query: mark < 0 ? '' : criteria.slice(mark + 1) };
}

/** Is `endpoint` under one of the allowed prefixes? Compared as the URL parser normalises it. */
export function endpointAllowed(endpoint: string, prefixes: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  if (url.username || url.password || url.hash) return false;
  // What some receivers and proxies decode or cut after the check, to leave the prefix: path parameters,
  // encoded slashes, backslashes, dots and percent signs.
  if (/;|%2f|%5c|%2e|%25/i.test(url.pathname)) return false;
  return prefixes.some((prefix) => url.href.startsWith(prefix));
}

/** `Name: value` lines as name/value pairs (already checked on write). */
export function headerPairs(lines: readonly string[]): [string, string][] {
  return lines.flatMap((line) => {
    const match = HEADER_LINE.exec(line);
    return match ? [[match[1], match[2].trim()] as [string, string]] : [];
  });
}

const issue = (expression: string, diagnostics: string, code: ValidationIssue['code'] = 'value'): ValidationIssue => ({
  severity: 'error',
  code,
  expression,
  diagnostics,
  rule: 'base',
});

/**
 * The problems of a Subscription a client wrote, beyond its R4 validation; the criteria are planned
 * with the caller's scopes (403 when they reach a type it may not search or read). Answers the resource
 * to store: `requested` or `active` become `requested` until the server has activated it.
 */
export function checkSubscription(
  request: FhirRequest,
  resource: FhirResource,
): { issues: ValidationIssue[]; resource: FhirResource } {
  const issues: ValidationIssue[] = [];
  const { config, search, types } = request.services;
  const criteria = typeof resource.criteria === 'string' ? resource.criteria : '';
  const parts = splitCriteria(criteria);
  if (criteria.length > MAX_CRITERIA_LENGTH) {
    issues.push(
      issue('Subscription.criteria', `Subscription.criteria is longer than ${MAX_CRITERIA_LENGTH} characters`),
    );
  } else if (!parts || !types.isResourceType(parts.type)) {
    issues.push(
      issue(
        'Subscription.criteria',
        'Subscription.criteria must be a search: a resource type and its query (Type?name=value)',
      ),
    );
  } else {
    const shaping = [...new URLSearchParams(parts.query).keys()].find((name) =>
      RESULT_PARAMETERS.has(name.split(':')[0]),
    );
    if (shaping) {
      issues.push(
        issue('Subscription.criteria', `Subscription.criteria: ${shaping} shapes results and has no place in criteria`),
      );
    } else {
      requireAccess(request, 'read', parts.type);
      requireAccess(request, 'search', parts.type);
      try {
        search.checkCriteria(request, parts.type, parts.query);
      } catch (error) {
        if (!(error instanceof AppError) || error.code === 'forbidden') throw error;
        issues.push(issue('Subscription.criteria', `Subscription.criteria: ${error.message}`));
      }
    }
  }

  const channel = (resource.channel ?? {}) as Record<string, unknown>;
  const channelType = channel.type;
  if (!SUBSCRIPTION_CHANNELS.includes(channelType as (typeof SUBSCRIPTION_CHANNELS)[number])) {
    issues.push(
      issue(
        'Subscription.channel.type',
        `Subscription.channel.type ${JSON.stringify(channelType ?? null)} is not served: use rest-hook or websocket`,
        'code-invalid',
      ),
    );
  }
  if (channelType === 'rest-hook') {
    const endpoint = channel.endpoint;
    if (typeof endpoint !== 'string' || endpoint.length > MAX_ENDPOINT_LENGTH) {
      issues.push(
        issue('Subscription.channel.endpoint', 'A rest-hook needs Subscription.channel.endpoint, an http(s) URL'),
      );
    } else if (!endpointAllowed(endpoint, config.subscriptions.endpoints)) {
      issues.push(
        issue(
          'Subscription.channel.endpoint',
          config.subscriptions.endpoints.length === 0
            ? 'No rest-hook endpoint is allowed: the server administrator lists the allowed URL prefixes in AMBIENT_SUBSCRIPTION_ENDPOINTS'
            : `Subscription.channel.endpoint is not under a prefix AMBIENT_SUBSCRIPTION_ENDPOINTS allows (${config.subscriptions.endpoints.join(', ')})`,
        ),
      );
    }
  }
  const payload = channel.payload;
  if (payload !== undefined && typeof channel.endpoint === 'string' && /[?#]/.test(channel.endpoint)) {
    issues.push(
      issue(
        'Subscription.channel.endpoint',
        'With a payload the endpoint is a FHIR base ({endpoint}/{type}/{id}): it takes no query',
      ),
    );
  }
  if (payload !== undefined && payload !== SUBSCRIPTION_PAYLOAD) {
    issues.push(
      issue(
        'Subscription.channel.payload',
        `Subscription.channel.payload ${JSON.stringify(payload)} is not served: leave it out (an empty notification) or use ${SUBSCRIPTION_PAYLOAD}`,
      ),
    );
  }
  const headers = Array.isArray(channel.header) ? channel.header : [];
  if (headers.length > MAX_SUBSCRIPTION_HEADERS) {
    issues.push(
      issue('Subscription.channel.header', `At most ${MAX_SUBSCRIPTION_HEADERS} Subscription.channel.header lines`),
    );
  }
  headers.forEach((line, i) => {
    const expression = `Subscription.channel.header[${i}]`;
    const match = typeof line === 'string' && line.length <= MAX_HEADER_LENGTH ? HEADER_LINE.exec(line) : null;
    if (!match)
      issues.push(
        issue(expression, `${expression} must be one line "Name: value" of at most ${MAX_HEADER_LENGTH} characters`),
      );
    else if (RESERVED_HEADER.test(match[1]))
      issues.push(issue(expression, `${expression}: the server sets ${match[1]} itself`));
  });

  const status = resource.status === 'active' ? 'requested' : resource.status;
  // What the server writes into a Subscription (its error text) is the server's to set.
  const { error: _error, ...rest } = resource;
  const stored: FhirResource = status === 'requested' ? { ...rest, status } : resource;
  return { issues, resource: stored };
}
