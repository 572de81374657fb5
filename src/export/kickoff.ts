// The kick-off request of a Bulk Data export (https://hl7.org/fhir/uv/bulkdata/STU2/export.html#bulk-data-kick-off-request):
// its Prefer header and parameters, from the query string (GET, POST) or a Parameters body (POST), as a
// typed ExportParameters. Pure: what the parameters mean for the data (types readable, filters valid) is
// checked by the caller (service.ts).
import { AppError } from '../errors.js';
import { pathOf, queryOf } from '../url-parts.js';

export const NDJSON = 'application/fhir+ndjson';

/** The `_outputFormat` values the IG names for NDJSON; all mean the same output. */
const OUTPUT_FORMATS = new Set([NDJSON, 'application/ndjson', 'ndjson']);

/** Parameters of the IG this server does not implement: 400, or ignored under Prefer: handling=lenient. */
const UNSUPPORTED = new Set([
  '_elements',
  'patient',
  'includeAssociatedData',
  'organizeOutputBy',
  'allowPartialManifests',
]);

/** Bounds on one kick-off, so that no request can ask for unbounded planning or work. */
export const KICKOFF_LIMITS = {
  /** `_type` entries (R4 has 146 resource types). */
  types: 200,
  /** `_typeFilter` queries. */
  typeFilters: 32,
  /** Characters of one `_typeFilter` query. */
  typeFilterLength: 2000,
} as const;

export interface TypeFilter {
  readonly type: string;
  /** The search query after `?`, as written (still percent-encoded). */
  readonly query: string;
}

export interface ExportParameters {
  /** The instant (epoch ms) after which a resource must have changed to be exported. */
  readonly since?: number;
  /** `_type`, without duplicates; undefined: every type the level covers. */
  readonly types?: readonly string[];
  readonly typeFilters: readonly TypeFilter[];
  /** Parameters ignored under Prefer: handling=lenient, for the log. */
  readonly ignored: readonly string[];
}

export interface Preferences {
  readonly respondAsync: boolean;
  readonly lenient: boolean;
}

/** The `Prefer` header's tokens that matter here (RFC 7240: comma-separated, case-insensitive). */
export function parsePrefer(header: string | undefined): Preferences {
  const tokens = (header ?? '').split(/[,;]/).map((t) =>
    t
      .trim()
      .toLowerCase()
      .replace(/\s*=\s*/, '='),
  );
  return { respondAsync: tokens.includes('respond-async'), lenient: tokens.includes('handling=lenient') };
}

function invalid(name: string, message: string): AppError {
  return new AppError('bad-request', message, { expression: name });
}

// An instant: a date-time with seconds and a time zone (https://hl7.org/fhir/R4/datatypes.html#instant).
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

export function parseInstant(name: string, value: string): number {
  const time = INSTANT.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(time)) {
    throw invalid(
      name,
      `${name}=${value} is not a FHIR instant (e.g. 2024-01-31T12:00:00Z, with seconds and a time zone)`,
    );
  }
  return time;
}

/**
 * The kick-off parameters as name/value pairs: the query string's, then (POST) those of a Parameters
 * resource in the body (https://hl7.org/fhir/uv/bulkdata/STU2/export.html#query-parameters).
 */
export function kickoffPairs(query: string, body: unknown): [string, string][] {
  const pairs: [string, string][] = [...new URLSearchParams(query)];
  if (body === undefined || body === null || body === '') return pairs;
  const parameters = body as { resourceType?: unknown; parameter?: unknown };
  if (typeof body !== 'object' || parameters.resourceType !== 'Parameters') {
    throw new AppError('bad-request', 'A POST kick-off takes a Parameters resource as its body (or none)');
  }
  const list = parameters.parameter ?? [];
  if (!Array.isArray(list)) throw invalid('Parameters.parameter', 'Parameters.parameter must be an array');
  for (const [i, entry] of list.entries()) {
    const { name, ...rest } = (entry ?? {}) as Record<string, unknown>;
    if (typeof name !== 'string' || name === '') {
      throw invalid(`Parameters.parameter[${i}]`, `Parameters.parameter[${i}] has no name`);
    }
    const valueKey = Object.keys(rest).find((key) => key.startsWith('value'));
    const value = valueKey === undefined ? undefined : rest[valueKey];
    // A reference (`patient`) is kept as its text so that the parameter is still seen (and refused).
    const text =
      typeof value === 'string'
        ? value
        : typeof (value as { reference?: unknown } | undefined)?.reference === 'string'
          ? String((value as { reference: string }).reference)
          : undefined;
    if (text === undefined) {
      throw invalid(`Parameters.parameter[${i}]`, `Parameters.parameter[${i}] (${name}) has no string value`);
    }
    pairs.push([name, text]);
  }
  return pairs;
}

/** `Type?query` → its type and query; 400 when malformed. */
export function parseTypeFilter(value: string, isResourceType: (name: string) => boolean): TypeFilter {
  if (value.length > KICKOFF_LIMITS.typeFilterLength) {
    throw invalid('_typeFilter', `A _typeFilter is limited to ${KICKOFF_LIMITS.typeFilterLength} characters`);
  }
  const type = pathOf(value);
  const query = queryOf(value);
  if (!isResourceType(type)) throw invalid('_typeFilter', `_typeFilter=${value}: ${type} is not a resource type`);
  if (query === '') throw invalid('_typeFilter', `_typeFilter=${value}: expected Type?search-parameters`);
  return { type, query };
}

/** Reads the kick-off parameters; 400 for a bad value, or for an unsupported parameter unless lenient. */
export function parseKickoff(
  pairs: readonly (readonly [string, string])[],
  options: { lenient: boolean; isResourceType: (name: string) => boolean },
): ExportParameters {
  let since: number | undefined;
  let types: string[] | undefined;
  const typeFilters: TypeFilter[] = [];
  const ignored: string[] = [];
  for (const [name, value] of pairs) {
    switch (name) {
      case '_outputFormat':
        if (!OUTPUT_FORMATS.has(value.trim())) {
          throw invalid(name, `_outputFormat=${value} is not supported: use ${[...OUTPUT_FORMATS].join(', ')}`);
        }
        break;
      case '_since':
        if (since !== undefined) throw invalid(name, '_since may be given once');
        since = parseInstant(name, value);
        break;
      case '_type':
        for (const type of value.split(',').map((t) => t.trim())) {
          if (!options.isResourceType(type)) throw invalid(name, `_type: "${type}" is not a resource type`);
          types ??= [];
          if (!types.includes(type)) types.push(type);
          if (types.length > KICKOFF_LIMITS.types) {
            throw invalid(name, `_type is limited to ${KICKOFF_LIMITS.types} types`);
          }
        }
        break;
      case '_typeFilter':
        typeFilters.push(parseTypeFilter(value, options.isResourceType));
        if (typeFilters.length > KICKOFF_LIMITS.typeFilters) {
          throw invalid(name, `_typeFilter is limited to ${KICKOFF_LIMITS.typeFilters} queries`);
        }
        break;
      default: {
        const why = UNSUPPORTED.has(name) ? 'is not supported by this server' : 'is not a kick-off parameter';
        if (!options.lenient) {
          throw new AppError(
            'operation-not-supported',
            `$export: the parameter ${name} ${why} (send Prefer: handling=lenient to have it ignored)`,
            { expression: name },
          );
        }
        ignored.push(name);
      }
    }
  }
  return { since, types, typeFilters, ignored };
}
