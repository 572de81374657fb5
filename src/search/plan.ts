// Stage 2 of the search pipeline: a parsed SearchRequest, checked against the search parameters of the
// searched types (catalog.ts), becomes a Plan: every criterion resolved to index rows and parameter
// ids (`sp`), chains and `_has` resolved to reference joins, modifiers and values checked (400 when
// they do not apply), unknown parameters collected (reported, or 400 with Prefer: handling=strict),
// and every type a chain, `_has` or include passes through checked against the caller's scopes (403).
import { AppError } from '../errors.js';
import type { CatalogParam, SearchCatalog } from './catalog.js';
import { rangeCondition, parseDateSearch } from './params/date.js';
import type { MatchContext, RowMatch } from './params/param-type.js';
import { invalid } from './params/param-type.js';
import type { Criterion, IncludeDirective, ParamKey, SearchRequest } from './parse.js';
import { or, raw } from './sql/fragment.js';
import type { Sql } from './sql/fragment.js';
import type { IndexTable } from './tables.js';
import { splitUnescaped, unescapeValue } from './values/escapes.js';
import type { GeoPoint } from './values/geo.js';
import type { ReferenceParser } from '../fhir/references.js';
import type { Dialect } from '../storage/sql/dialect.js';

/**
 * Set by estimate.ts from the data: how many index rows the criterion matches, counted up to a cap.
 * compile.ts drives a query from the smallest estimate, and from none over the cap.
 */
export interface Estimated {
  readonly estimatedRows?: number;
}

export type PlannedCriterion = Estimated &
  (
    | { readonly kind: 'id'; readonly ids: readonly string[]; readonly selectivity: number }
    | { readonly kind: 'lastUpdated'; readonly condition: (column: string) => Sql; readonly selectivity: number }
    | {
        readonly kind: 'rows';
        readonly table: IndexTable;
        readonly sps: readonly number[];
        readonly match: RowMatch;
        readonly selectivity: number;
      }
    | {
        readonly kind: 'missing';
        readonly table: IndexTable;
        readonly sps: readonly number[];
        /** true: resources without a value; false: with one. */
        readonly missing: boolean;
        readonly selectivity: number;
      }
    | {
        readonly kind: 'composite';
        /** OR of alternatives; each is the AND of its components, matched on rows of one element (grp). */
        readonly alternatives: readonly (readonly CompositePart[])[];
        /** `:missing=true`: no element has them all. */
        readonly negated?: boolean;
        readonly selectivity: number;
      }
    | {
        readonly kind: 'chain';
        readonly refSps: readonly number[];
        readonly targetTypes: readonly string[];
        readonly inner: PlannedCriterion;
        readonly selectivity: number;
      }
    | {
        readonly kind: 'has';
        readonly sourceType: string;
        readonly refSps: readonly number[];
        readonly targetTypes: readonly string[];
        readonly inner: PlannedCriterion;
        readonly selectivity: number;
      }
    | {
        /**
         * In the compartment of `compartmentType/id` (compartment.ts): one of the reference parameters
         * `refSps` refers to it (an OR across the member types' parameters), or, for `selfType`, the
         * resource is the compartment's own.
         */
        readonly kind: 'compartment';
        readonly compartmentType: string;
        readonly id: string;
        readonly refSps: readonly number[];
        readonly selfType?: string;
        readonly selectivity: number;
      }
    | {
        /** `inner` applies to resources of `types` only; the others pass (`$everything`'s dates). */
        readonly kind: 'forTypes';
        readonly types: readonly string[];
        readonly inner: PlannedCriterion;
        readonly selectivity: number;
      }
    | {
        /** The resource `type/id` passes; the others must match `inner` (`$everything`'s `_since`). */
        readonly kind: 'exceptResource';
        readonly type: string;
        readonly id: string;
        readonly inner: PlannedCriterion;
        readonly selectivity: number;
      }
  );

export interface CompositePart {
  readonly table: IndexTable;
  readonly sps: readonly number[];
  readonly condition: Sql;
}

export type PlannedSort =
  | {
      readonly kind: 'column';
      readonly column: 'id' | 'last_updated';
      readonly descending: boolean;
      readonly code: string;
    }
  | {
      readonly kind: 'index';
      readonly table: IndexTable;
      /** Over alias `t` (see ParamTypeHandler.sort). */
      readonly column: Sql;
      readonly tiebreak: readonly Sql[];
      readonly filter?: Sql;
      readonly sps: readonly number[];
      readonly descending: boolean;
      readonly code: string;
    };

export interface PlannedInclude {
  readonly directive: IncludeDirective;
  /** The reference parameters followed, per source type. */
  readonly sps: readonly number[];
  readonly sourceTypes: readonly string[];
  /** Types the parameters may refer to (their targets, or the directive's target type); none: any. */
  readonly targetTypes: readonly string[];
  /**
   * The types the included resources are of, and no other, filtered in SQL: forward, the targets (every
   * type the caller may search when the parameters declare none); reverse, the source types. Each one the
   * caller may search (planInclude refuses the include otherwise), whatever the stored references say: a
   * reference written before its target type was checked, or to any type, returns nothing else.
   */
  readonly returnedTypes: readonly string[];
}

export interface Plan {
  readonly types: readonly string[];
  readonly criteria: readonly PlannedCriterion[];
  readonly sort: readonly PlannedSort[];
  readonly includes: readonly PlannedInclude[];
  /** Parameters ignored (unknown, unsupported, empty), each with the reason: reported in the Bundle. */
  readonly ignored: readonly { readonly name: string; readonly reason: string }[];
  /** The parameters that count, in request order, for the self/next links. */
  readonly linkParams: readonly (readonly [string, string])[];
  /** Location `near`: the points each match's distance is measured from (the nearest counts). */
  readonly distanceFrom?: readonly GeoPoint[];
}

export interface PlanContext {
  readonly catalog: SearchCatalog;
  readonly references: ReferenceParser;
  readonly now: number;
  readonly strict: boolean;
  /** May the caller search this type? */
  readonly canSearch: (type: string) => boolean;
  /** May the caller read this type (`_list` reads through a List)? Without it, search decides. */
  readonly canRead?: (type: string) => boolean;
  /** The database's SQL, for the value lists of the row conditions (fragment.ts equalsAny). */
  readonly dialect: Dialect;
}

/** A parameter the plan could not use: reported (lenient) or 400 (strict). */
class Unknown extends Error {}

function forbidden(type: string, via: string): AppError {
  return new AppError(
    'forbidden',
    `The token's scopes do not allow search on ${type}, which ${via} passes through (needs system/${type}.s or wider)`,
  );
}

export function planSearch(request: SearchRequest, types: readonly string[], ctx: PlanContext): Plan {
  const ignored: { name: string; reason: string }[] = [...request.ignored];
  const criteria: PlannedCriterion[] = [];
  const linkParams: [string, string][] = [];
  for (const criterion of request.criteria) {
    try {
      criteria.push(planCriterion(criterion, criterion.key, types, ctx));
      linkParams.push([criterion.name, criterion.value]);
    } catch (error) {
      if (!(error instanceof Unknown)) throw error;
      ignored.push({ name: criterion.name, reason: error.message });
    }
  }
  const sort: PlannedSort[] = [];
  for (const key of request.sort) {
    try {
      sort.push(planSort(key.code, key.descending, types, ctx));
    } catch (error) {
      // An order the client asked for and would not get is an error, not a warning (docs/api.md).
      if (!(error instanceof Unknown)) throw error;
      throw invalid('_sort', `_sort: ${error.message}`);
    }
  }
  const includes = request.includes.map((directive) => planInclude(directive, types, ctx));
  if (ctx.strict && ignored.length > 0) {
    throw new AppError(
      'invalid-search',
      `Unknown or unsupported search parameters (Prefer: handling=strict): ${ignored.map((i) => `${i.name} (${i.reason})`).join('; ')}`,
      { expression: ignored[0].name },
    );
  }
  for (const [name, value] of request.resultParams) {
    if (name === '_sort') {
      const kept = request.sort.filter((k) => !ignored.some((i) => i.name === `_sort=${k.code}`));
      if (kept.length > 0) linkParams.push([name, kept.map((k) => (k.descending ? '-' : '') + k.code).join(',')]);
    } else linkParams.push([name, value]);
  }
  const distanceFrom = criteria.flatMap((c) => (c.kind === 'rows' ? (c.match.origins ?? []) : []));
  return { types, criteria, sort, includes, ignored, linkParams, ...(distanceFrom.length ? { distanceFrom } : {}) };
}

/** The parameter `code` on every one of `types` (all must define it). */
function paramsFor(code: string, types: readonly string[], ctx: PlanContext): CatalogParam[] {
  const params: CatalogParam[] = [];
  for (const type of types) {
    const param = ctx.catalog.param(type, code);
    if (!param) {
      throw new Unknown(
        types.length === 1
          ? `${type} has no search parameter "${code}"`
          : `"${code}" is not a search parameter of ${type}`,
      );
    }
    if (param.kind === 'unsupported') throw new Unknown(`${code} is not supported by this server`);
    params.push(param);
  }
  return params;
}

function matchContext(name: string, params: readonly CatalogParam[], ctx: PlanContext): MatchContext {
  return {
    references: ctx.references,
    now: ctx.now,
    targets: [...new Set(params.flatMap((p) => p.targets))],
    name,
    dialect: ctx.dialect,
  };
}

function planCriterion(
  criterion: Criterion,
  key: ParamKey,
  types: readonly string[],
  ctx: PlanContext,
): PlannedCriterion {
  const name = criterion.name;
  if (key.kind === 'has') return planHas(criterion, key, types, ctx);
  if (key.next) return planChain(criterion, key, types, ctx);
  if (key.code === '_list') return planList(criterion, key, types, ctx);
  const params = paramsFor(key.code, types, ctx);
  const first = params[0];
  const modifier = key.modifier;
  const values = criterion.values;

  if (modifier === 'missing') {
    if (values.length !== 1 || (values[0] !== 'true' && values[0] !== 'false')) {
      throw invalid(name, `${name} must be true or false`);
    }
    if (first.kind === 'id' || first.kind === 'lastUpdated') {
      // Every resource has an id and a lastUpdated.
      return values[0] === 'true'
        ? { kind: 'id', ids: [], selectivity: 0 }
        : { kind: 'lastUpdated', condition: () => raw('1=1'), selectivity: 9 };
    }
    if (first.kind === 'composite') {
      // A composite is present when one element has a value for every component.
      const parts = first.components!.map((component, i): CompositePart => ({
        table: component.handler.table,
        sps: params.map((p) => p.components![i].sp),
        condition: raw('1=1'),
      }));
      return { kind: 'composite', alternatives: [parts], negated: values[0] === 'true', selectivity: 9 };
    }
    return {
      kind: 'missing',
      table: first.handler!.table,
      sps: params.map((p) => p.sp),
      missing: values[0] === 'true',
      selectivity: 9,
    };
  }

  switch (first.kind) {
    case 'id': {
      if (modifier !== undefined) throw invalid(name, `${name}: _id takes no modifier`);
      const ids = values.map(unescapeValue);
      if (ids.some((id) => id === '')) throw invalid(name, `${name}: empty value`);
      return { kind: 'id', ids, selectivity: 0 };
    }
    case 'lastUpdated': {
      if (modifier !== undefined) throw invalid(name, `${name}: _lastUpdated takes no modifier`);
      const parsed = values.map((v) => parseDateSearch(name, v));
      return {
        kind: 'lastUpdated',
        condition: (column) =>
          or(
            parsed.map(({ prefix, range }) =>
              rangeCondition(prefix, range, raw(column), raw(`(${column} + 1)`), ctx.now),
            ),
          ),
        selectivity: 5,
      };
    }
    case 'composite':
      return planComposite(criterion, params, ctx);
    case 'index':
      break;
    default:
      throw new Unknown(`${key.code} is not supported by this server`);
  }

  const handler = first.handler!;
  if (handler.type === 'reference' && modifier !== undefined && !['identifier', 'above', 'below'].includes(modifier)) {
    // `subject:Patient=123`: the modifier names the target type.
    if (!ctx.catalog.registry.isResourceType(modifier)) {
      throw invalid(name, `The modifier :${modifier} does not apply to reference parameter ${key.code}`);
    }
    const targets = new Set(params.flatMap((p) => p.targets));
    if (targets.size > 0 && !targets.has(modifier)) {
      throw invalid(name, `${name}: ${key.code} cannot refer to ${modifier} (targets: ${[...targets].join(', ')})`);
    }
  }
  const match = handler.match(values, modifier, matchContext(name, params, ctx));
  return {
    kind: 'rows',
    table: match.table ?? handler.table,
    sps: params.map((p) => (match.useExtraSp ? p.extraSp : p.sp)),
    match,
    selectivity: match.selectivity,
  };
}

function planComposite(criterion: Criterion, params: readonly CatalogParam[], ctx: PlanContext): PlannedCriterion {
  const name = criterion.name;
  if (criterion.key.kind === 'param' && criterion.key.modifier !== undefined) {
    throw invalid(
      name,
      `The modifier :${criterion.key.modifier} does not apply to composite parameter ${criterion.key.code}`,
    );
  }
  const components = params[0].components!;
  const alternatives = criterion.values.map((value) => {
    const parts = splitUnescaped(value, '$');
    if (parts.length !== components.length) {
      throw invalid(name, `${name}: expected ${components.length} parts separated by $, got "${value}"`);
    }
    return components.map((component, i): CompositePart => {
      const match = component.handler.match([parts[i]], undefined, {
        ...matchContext(name, params, ctx),
        name: `${name} (${component.code})`,
      });
      return {
        table: match.table ?? component.handler.table,
        sps: params.map((p) => (match.useExtraSp ? p.components![i].extraSp : p.components![i].sp)),
        condition: match.condition,
      };
    });
  });
  return { kind: 'composite', alternatives, selectivity: 2 };
}

function planChain(
  criterion: Criterion,
  key: Extract<ParamKey, { kind: 'param' }>,
  types: readonly string[],
  ctx: PlanContext,
): PlannedCriterion {
  const name = criterion.name;
  const params = paramsFor(key.code, types, ctx);
  if (params[0].type !== 'reference')
    throw invalid(name, `${name}: ${key.code} is not a reference parameter, so it cannot be chained`);
  let targets = [...new Set(params.flatMap((p) => p.targets))];
  if (key.modifier !== undefined) {
    if (!ctx.catalog.registry.isResourceType(key.modifier))
      throw invalid(name, `${name}: ${key.modifier} is not a resource type`);
    if (targets.length > 0 && !targets.includes(key.modifier)) {
      throw invalid(name, `${name}: ${key.code} cannot refer to ${key.modifier}`);
    }
    targets = [key.modifier];
  }
  const next = key.next!;
  // Only the targets that define the chained parameter take part.
  const nextCode = next.kind === 'param' ? next.code : undefined;
  const usable = nextCode === undefined ? targets : targets.filter((t) => ctx.catalog.param(t, nextCode) !== undefined);
  if (usable.length === 0) throw new Unknown(`none of the targets of ${key.code} has a search parameter "${nextCode}"`);
  for (const type of usable) if (!ctx.canSearch(type)) throw forbidden(type, `the chain ${name}`);
  const inner = planCriterion(criterion, next, usable, ctx);
  return {
    kind: 'chain',
    refSps: params.map((p) => p.sp),
    targetTypes: usable,
    inner,
    // Cheap as a driver when the inner criterion is: its matches, then an index lookup of their referrers.
    selectivity: inner.selectivity,
  };
}

function planHas(
  criterion: Criterion,
  key: Extract<ParamKey, { kind: 'has' }>,
  types: readonly string[],
  ctx: PlanContext,
): PlannedCriterion {
  const name = criterion.name;
  if (!ctx.catalog.registry.isResourceType(key.type))
    throw invalid(name, `${name}: ${key.type} is not a resource type`);
  const reference = ctx.catalog.param(key.type, key.reference);
  if (!reference || reference.type !== 'reference' || reference.kind !== 'index') {
    throw invalid(name, `${name}: ${key.type} has no reference parameter "${key.reference}"`);
  }
  const targetTypes = reference.targets.length > 0 ? types.filter((t) => reference.targets.includes(t)) : [...types];
  if (targetTypes.length === 0)
    throw invalid(name, `${name}: ${key.type}.${key.reference} never refers to ${types.join(', ')}`);
  if (!ctx.canSearch(key.type)) throw forbidden(key.type, `_has (${name})`);
  const inner = planCriterion(criterion, key.next, [key.type], ctx);
  return {
    kind: 'has',
    sourceType: key.type,
    refSps: [reference.sp],
    targetTypes,
    inner,
    selectivity: inner.selectivity,
  };
}

/**
 * `_list=<id>` (https://hl7.org/fhir/R4/search.html#list): the resources List/<id> names in
 * `entry.item`, as the List's own `item` parameter indexes them: `_has:List:item:_id=<id>`, a reverse
 * chain from the List. It reveals the List's items, so the caller must be allowed to read or search
 * Lists (either already shows them: `GET List/<id>`, `List?_id=<id>`), besides the searched types.
 * Functional lists (`$current-allergies`...) are not supported.
 */
function planList(
  criterion: Criterion,
  key: Extract<ParamKey, { kind: 'param' }>,
  types: readonly string[],
  ctx: PlanContext,
): PlannedCriterion {
  const name = criterion.name;
  if (key.modifier !== undefined) throw invalid(name, `${name}: _list takes no modifier`);
  const ids = criterion.values.map(unescapeValue);
  if (ids.some((id) => id === '')) throw invalid(name, `${name}: empty value`);
  if (ids.some((id) => id.startsWith('$'))) throw new Unknown('functional lists ($name) are not supported');
  const item = ctx.catalog.param('List', 'item');
  if (!item || item.kind !== 'index') throw new Unknown('List has no item parameter');
  if (!ctx.canSearch('List') && !ctx.canRead?.('List')) {
    throw new AppError(
      'forbidden',
      `The token's scopes do not allow reading Lists, which ${name} reads (needs system/List.r or system/List.s)`,
    );
  }
  const targetTypes = types.filter((t) => item.targets.length === 0 || item.targets.includes(t));
  if (targetTypes.length === 0) throw invalid(name, `${name}: a List never holds ${types.join(', ')}`);
  const inner: PlannedCriterion = { kind: 'id', ids, selectivity: 0 };
  return { kind: 'has', sourceType: 'List', refSps: [item.sp], targetTypes, inner, selectivity: 0 };
}

function planSort(code: string, descending: boolean, types: readonly string[], ctx: PlanContext): PlannedSort {
  const params = paramsFor(code, types, ctx);
  const first = params[0];
  if (first.kind === 'id') return { kind: 'column', column: 'id', descending, code };
  if (first.kind === 'lastUpdated') return { kind: 'column', column: 'last_updated', descending, code };
  const handler = first.handler;
  if (first.kind !== 'index' || !handler?.sort) {
    throw invalid('_sort', `_sort: ${code} is a ${first.type} parameter, which this server cannot sort on`);
  }
  return {
    kind: 'index',
    table: handler.table,
    column: handler.sort.column,
    tiebreak: handler.sort.tiebreak,
    filter: handler.sort.filter,
    sps: params.map((p) => p.sp),
    descending,
    code,
  };
}

function planInclude(directive: IncludeDirective, types: readonly string[], ctx: PlanContext): PlannedInclude {
  const name = directive.reverse ? '_revinclude' : '_include';
  const label = `${name}=${directive.value}`;
  const registry = ctx.catalog.registry;
  let sourceTypes: string[];
  if (directive.sourceType === '*') {
    // `_include=*`: every reference parameter of the searched types; `_revinclude=*` is not supported.
    if (directive.reverse)
      throw invalid(name, `${label}: _revinclude=* is not supported; name the source type and parameter`);
    sourceTypes = [...types];
  } else {
    if (!registry.isResourceType(directive.sourceType))
      throw invalid(name, `${label}: ${directive.sourceType} is not a resource type`);
    sourceTypes = [directive.sourceType];
  }
  const sps: number[] = [];
  const targetTypes = new Set<string>();
  /** A parameter that declares no target types refers to any type. */
  let anyTargetParam = false;
  for (const sourceType of sourceTypes) {
    const params =
      directive.param === '*'
        ? [...ctx.catalog.forType(sourceType).params.values()].filter(
            (p) => p.type === 'reference' && p.kind === 'index',
          )
        : [ctx.catalog.param(sourceType, directive.param)];
    for (const param of params) {
      if (!param || param.type !== 'reference' || param.kind !== 'index') {
        throw invalid(name, `${label}: ${sourceType} has no reference parameter "${directive.param}"`);
      }
      if (
        directive.targetType !== undefined &&
        param.targets.length > 0 &&
        !param.targets.includes(directive.targetType)
      ) {
        throw invalid(name, `${label}: ${sourceType}.${param.code} cannot refer to ${directive.targetType}`);
      }
      sps.push(param.sp);
      const declared = directive.targetType !== undefined ? [directive.targetType] : param.targets;
      if (declared.length === 0) anyTargetParam = true;
      for (const target of declared) targetTypes.add(target);
    }
  }
  if (directive.targetType !== undefined && !registry.isResourceType(directive.targetType)) {
    throw invalid(name, `${label}: ${directive.targetType} is not a resource type`);
  }
  // Access: what the include returns must be searchable by the caller.
  const declared = directive.reverse ? sourceTypes : [...targetTypes];
  for (const type of declared) if (!ctx.canSearch(type)) throw forbidden(type, label);
  const anyTarget = !directive.reverse && (targetTypes.size === 0 || anyTargetParam);
  const returnedTypes = anyTarget
    ? [...new Set([...declared, ...registry.resourceTypes.filter(ctx.canSearch)])]
    : declared;
  return { directive, sps, sourceTypes, targetTypes: [...targetTypes], returnedTypes };
}
