// Patient $everything (https://hl7.org/fhir/R4/patient-operation-everything.html), planned as a search:
// the resources of the Patient compartment (compartment.ts) of the types the caller may read, walked in
// pk order (the stable default order of every search, so the pages visit each resource once even while
// others write) and paged with the search's signed keyset cursors; the resources they refer to outside
// the compartment (practitioners, organizations, locations, medications...) come as includes. Pure:
// parsing and planning only; engine.ts runs the plan like any search.
import type { CompartmentRule, R4Registry } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { parseCount, parseInstantParameter } from '../fhir/query-values.js';
import type { SearchCatalog } from './catalog.js';
import { compartmentCriterion, memberTypes } from './compartment.js';
import type { Criterion, SearchRequest } from './parse.js';
import { parseSearch } from './parse.js';
import type { Plan, PlanContext, PlannedCriterion, PlannedInclude } from './plan.js';
import { planSearch } from './plan.js';

/** The operation's parameters (R4 defines these five; `_format`/`_pretty` are the HTTP layer's). */
export interface EverythingRequest {
  readonly start?: string;
  readonly end?: string;
  readonly since?: string;
  readonly types?: readonly string[];
  readonly count: number;
  readonly cursor?: string;
  /** As written, in request order, for the self and next links. */
  readonly linkParams: readonly (readonly [string, string])[];
}

const TRANSPORT = new Set(['_format', '_pretty']);

function invalid(name: string, message: string): AppError {
  return new AppError('invalid-search', message, { expression: name });
}

/** The query of `GET Patient/{id}/$everything?...` → an EverythingRequest; 400 for anything else. */
export function parseEverything(params: ReadonlyArray<readonly [string, string]>): EverythingRequest {
  let start: string | undefined;
  let end: string | undefined;
  let since: string | undefined;
  let types: string[] | undefined;
  let count: number | undefined;
  let cursor: string | undefined;
  const linkParams: [string, string][] = [];
  const once = (name: string, seen: unknown) => {
    if (seen !== undefined) throw invalid(name, `$everything takes ${name} once`);
  };
  for (const [name, value] of params) {
    if (TRANSPORT.has(name)) continue;
    switch (name) {
      case 'start':
      case 'end':
      case '_since': {
        once(name, name === 'start' ? start : name === 'end' ? end : since);
        parseInstantParameter(name, value);
        if (name === 'start') start = value;
        else if (name === 'end') end = value;
        else since = value;
        break;
      }
      case '_type':
        types = [
          ...(types ?? []),
          ...value
            .split(',')
            .map((t) => t.trim())
            .filter(Boolean),
        ];
        if (types.length === 0) throw invalid(name, '_type needs at least one resource type');
        break;
      case '_count':
        once(name, count);
        count = parseCount(value);
        break;
      case '_cursor':
        cursor = value;
        continue;
      default:
        throw invalid(
          name,
          `$everything does not take ${name}: its parameters are start, end, _since, _type and _count (https://hl7.org/fhir/R4/patient-operation-everything.html)`,
        );
    }
    linkParams.push([name, value]);
  }
  return { start, end, since, types, count: count ?? parseCount(undefined), cursor, linkParams };
}

/**
 * The types `$everything` returns: the Patient compartment's members the caller may read, narrowed by
 * `_type` (400 for a type that is unknown or not in the compartment, 403 for one the caller may not read).
 */
export function everythingTypes(
  registry: R4Registry,
  rule: CompartmentRule,
  requested: readonly string[] | undefined,
  canRead: (type: string) => boolean,
): string[] {
  if (!requested) return memberTypes(rule).filter(canRead);
  for (const type of requested) {
    if (!registry.isResourceType(type)) throw invalid('_type', `_type: ${type} is not a resource type`);
    if (!rule.members[type]) {
      throw invalid('_type', `_type: ${type} is not in the Patient compartment, so $everything never returns it`);
    }
    if (!canRead(type)) {
      throw new AppError(
        'forbidden',
        `The token's scopes do not allow read on ${type} (needs system/${type}.r or wider)`,
      );
    }
  }
  return [...new Set(requested)].sort();
}

/** A criterion written by the operation (`start` → `date=ge...`), planned by the search planner. */
function criterion(name: string, code: string, value: string): Criterion {
  return { name, key: { kind: 'param', code }, value, values: [value] };
}

/** The search request the executor pages with: no result parameters but `_count` and the cursor. */
export function everythingSearchRequest(request: EverythingRequest): SearchRequest {
  return { ...parseSearch([]), count: request.count, cursor: request.cursor };
}

export interface EverythingContext {
  readonly catalog: SearchCatalog;
  readonly plan: Omit<PlanContext, 'catalog' | 'canSearch' | 'strict'>;
  readonly canRead: (type: string) => boolean;
}

/**
 * The plan of `$everything` on `Patient/id` over `types`: in the compartment; `start`/`end` on each
 * type's `date` parameter (`date=ge<start>`, `date=le<end>`, as a search would; types without a `date`
 * parameter, the Patient among them, are not filtered); `_since` on meta.lastUpdated, except for the
 * patient itself; and, without `_type`, as includes, what the page's resources refer to of the types
 * outside the compartment the caller may read.
 */
export function planEverything(
  rule: CompartmentRule,
  id: string,
  types: readonly string[],
  request: EverythingRequest,
  ctx: EverythingContext,
): Plan {
  const planContext: PlanContext = { ...ctx.plan, catalog: ctx.catalog, strict: true, canSearch: ctx.canRead };
  const plan = (criteria: Criterion[], over: readonly string[]): readonly PlannedCriterion[] =>
    planSearch({ ...parseSearch([]), criteria }, over, planContext).criteria;

  const criteria: PlannedCriterion[] = [compartmentCriterion(rule, id, types)];
  const dated = types.filter((type) => {
    const param = ctx.catalog.param(type, 'date');
    return param?.kind === 'index' && param.type === 'date';
  });
  const dates = [
    ...(request.start !== undefined ? [criterion('start', 'date', `ge${request.start}`)] : []),
    ...(request.end !== undefined ? [criterion('end', 'date', `le${request.end}`)] : []),
  ];
  if (dates.length > 0 && dated.length > 0) {
    for (const inner of plan(dates, dated)) {
      criteria.push({ kind: 'forTypes', types: dated, inner, selectivity: inner.selectivity });
    }
  }
  // The patient comes whatever `_since` says: the resources are about it, and a client merging what
  // changed needs to know whose they are.
  if (request.since !== undefined) {
    for (const inner of plan([criterion('_since', '_lastUpdated', `ge${request.since}`)], types)) {
      criteria.push({ kind: 'exceptResource', type: 'Patient', id, inner, selectivity: inner.selectivity });
    }
  }

  // `_type` names every type returned (R4: "the resource types to include"): what the members refer to
  // outside the compartment comes only without it.
  const outside =
    request.types === undefined
      ? ctx.catalog.registry.resourceTypes.filter((type) => !rule.members[type] && ctx.canRead(type))
      : [];
  const includes: PlannedInclude[] = [];
  if (outside.length > 0) {
    const sps = types.flatMap((type) =>
      [...ctx.catalog.forType(type).params.values()]
        .filter((p) => p.type === 'reference' && p.kind === 'index')
        .map((p) => p.sp),
    );
    if (sps.length > 0) {
      includes.push({
        directive: { reverse: false, iterate: false, sourceType: '*', param: '*', value: '*' },
        sps,
        sourceTypes: types,
        targetTypes: outside,
        returnedTypes: outside,
      });
    }
  }
  return { types, criteria, sort: [], includes, ignored: [], linkParams: request.linkParams };
}
