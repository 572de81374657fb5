// Stage 1 of the search pipeline (the style notes §5): the query's name/value pairs → a typed SearchRequest.
// Pure: no registry, no database. It reads the syntax of https://hl7.org/fhir/R4/search.html
// (modifiers, chains `a:T.b`, `_has:T:ref:param`, comma ORs with `\,` escapes, the result parameters)
// and leaves the meaning (does the parameter exist? does the modifier apply?) to plan.ts.
import { AppError } from '../errors.js';
import { parseCount } from '../fhir/query-values.js';
import { SEARCH_LIMITS } from './cost-limits.js';
import { splitUnescaped } from './values/escapes.js';
import { SUMMARY_MODES } from '../fhir/elements.js';
import type { SummaryMode } from '../fhir/elements.js';

/** A parameter name as written: `code[:modifier]`, a chain `ref[:Type].next`, or `_has:Type:ref:next`. */
export type ParamKey =
  | { readonly kind: 'param'; readonly code: string; readonly modifier?: string; readonly next?: ParamKey }
  | { readonly kind: 'has'; readonly type: string; readonly reference: string; readonly next: ParamKey };

export interface Criterion {
  /** The name as written (for messages and links). */
  readonly name: string;
  readonly key: ParamKey;
  /** The raw value as written (for links). */
  readonly value: string;
  /** The OR alternatives, split on unescaped commas; escapes are kept for the type parsers. */
  readonly values: readonly string[];
}

export interface SortKey {
  readonly code: string;
  readonly descending: boolean;
}

export interface IncludeDirective {
  /** `_include` or `_revinclude`. */
  readonly reverse: boolean;
  readonly iterate: boolean;
  /** Source type (`*` allowed for iterate in the spec; we require a type unless the whole value is `*`). */
  readonly sourceType: string;
  /** The reference parameter, or `*` for all of the source type's reference parameters. */
  readonly param: string;
  readonly targetType?: string;
  /** As written, for links. */
  readonly value: string;
}

export type TotalMode = 'none' | 'estimate' | 'accurate';

export interface SearchRequest {
  readonly criteria: readonly Criterion[];
  readonly sort: readonly SortKey[];
  readonly count: number;
  readonly total?: TotalMode;
  readonly summary?: SummaryMode;
  readonly elements?: readonly string[];
  readonly includes: readonly IncludeDirective[];
  readonly cursor?: string;
  /** `_type` of a system search. */
  readonly types?: readonly string[];
  /** The result parameters as written (kept in links). */
  readonly resultParams: readonly (readonly [string, string])[];
  /** Parameters left out (no value): reported, or 400 with Prefer: handling=strict. */
  readonly ignored: readonly { readonly name: string; readonly reason: string }[];
}

/**
 * Limits the parser holds a search to (cost-limits.ts: SEARCH_LIMITS, documented in docs/search.md). Counts
 * beyond them are refused as too costly (422); a name over `nameLength` is malformed (400).
 */
export const LIMITS = {
  criteria: SEARCH_LIMITS.criteria,
  chainDepth: SEARCH_LIMITS.chainDepth,
  orValues: SEARCH_LIMITS.valuesPerCriterion,
  sortKeys: SEARCH_LIMITS.sortKeys,
  includes: SEARCH_LIMITS.includes,
  nameLength: 1000,
} as const;

/** Parameters the HTTP layer handles; they are neither criteria nor reported as unknown. */
const TRANSPORT = new Set(['_format', '_pretty']);

function fail(name: string, message: string): never {
  throw new AppError('invalid-search', message, { expression: name });
}

function tooCostly(name: string, message: string): never {
  throw new AppError('search-too-costly', message, { expression: name });
}

export function parseParamKey(name: string): ParamKey {
  if (name.length > LIMITS.nameLength)
    fail(name.slice(0, 64), `A parameter name is limited to ${LIMITS.nameLength} characters`);
  const links = name.split('.').length - 1 + (name.match(/_has:/g)?.length ?? 0);
  if (links > LIMITS.chainDepth) {
    tooCostly(name.slice(0, 64), `Chains and _has are limited to ${LIMITS.chainDepth} links per parameter`);
  }
  return parseKey(name);
}

function parseKey(name: string): ParamKey {
  if (name.startsWith('_has:')) {
    const parts = name.split(':');
    if (parts.length < 4 || !parts[1] || !parts[2] || !parts[3]) {
      fail(name, `${name}: _has takes the form _has:Type:reference:parameter`);
    }
    const rest = parts.slice(3).join(':');
    return { kind: 'has', type: parts[1], reference: parts[2], next: parseKey(rest) };
  }
  const dot = name.indexOf('.');
  const head = dot < 0 ? name : name.slice(0, dot);
  const colon = head.indexOf(':');
  const code = colon < 0 ? head : head.slice(0, colon);
  const modifier = colon < 0 ? undefined : head.slice(colon + 1);
  if (code === '' || modifier === '' || !/^[A-Za-z0-9_-]+$/.test(code))
    fail(name, `"${name}" is not a valid parameter name`);
  if (modifier !== undefined && !/^[A-Za-z0-9-]+$/.test(modifier)) fail(name, `${name}: invalid modifier`);
  if (dot < 0) return { kind: 'param', code, modifier };
  const rest = name.slice(dot + 1);
  if (rest === '') fail(name, `${name}: a chain needs a parameter after the "."`);
  return { kind: 'param', code, modifier, next: parseKey(rest) };
}

function parseInclude(name: string, value: string): IncludeDirective {
  const [base, flag] = name.split(':');
  const reverse = base === '_revinclude';
  if (flag !== undefined && flag !== 'iterate' && flag !== 'recurse') {
    fail(name, `${name}: the only modifier of ${base} is :iterate`);
  }
  const iterate = flag !== undefined;
  if (value === '*') return { reverse, iterate, sourceType: '*', param: '*', value };
  const parts = value.split(':');
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => p === '')) {
    fail(name, `${name}=${value}: expected SourceType:parameter or SourceType:parameter:TargetType`);
  }
  return { reverse, iterate, sourceType: parts[0], param: parts[1], targetType: parts[2], value };
}

const SUMMARY = SUMMARY_MODES;
const TOTAL: readonly TotalMode[] = ['none', 'estimate', 'accurate'];

/** Parses the decoded name/value pairs of a search, in request order. Throws AppError 400. */
export function parseSearch(params: ReadonlyArray<readonly [string, string]>): SearchRequest {
  const criteria: Criterion[] = [];
  const sort: SortKey[] = [];
  const includes: IncludeDirective[] = [];
  const resultParams: [string, string][] = [];
  let count: number | undefined;
  let total: TotalMode | undefined;
  let summary: SummaryMode | undefined;
  let elements: string[] | undefined;
  let cursor: string | undefined;
  let types: string[] | undefined;
  const ignored: { name: string; reason: string }[] = [];

  for (const [name, value] of params) {
    if (TRANSPORT.has(name)) continue;
    // U+0000 cannot be stored or compared by PostgreSQL's text type; no FHIR value holds it.
    if (name.includes('\u0000') || value.includes('\u0000'))
      fail(name.replaceAll('\u0000', ''), 'A search parameter holds U+0000');
    const base = name.split(':')[0];
    switch (base) {
      case '_sort': {
        if (name !== '_sort') fail(name, `${name}: write descending sorts as _sort=-param`);
        for (const item of value.split(',')) {
          const descending = item.startsWith('-');
          const code = descending ? item.slice(1) : item;
          if (!/^[A-Za-z0-9_-]+$/.test(code)) fail(name, `_sort: "${item}" is not a parameter name`);
          // A key repeated adds nothing: the first occurrence already ordered by it.
          if (!sort.some((k) => k.code === code)) sort.push({ code, descending });
        }
        if (sort.length > LIMITS.sortKeys) tooCostly(name, `_sort is limited to ${LIMITS.sortKeys} parameters`);
        resultParams.push([name, value]);
        continue;
      }
      case '_count':
        count = parseCount(value);
        resultParams.push([name, value]);
        continue;
      case '_total':
        if (!(TOTAL as readonly string[]).includes(value)) fail(name, `_total must be one of ${TOTAL.join(', ')}`);
        total = value as TotalMode;
        resultParams.push([name, value]);
        continue;
      case '_summary':
        if (!(SUMMARY as readonly string[]).includes(value))
          fail(name, `_summary must be one of ${SUMMARY.join(', ')}`);
        summary = value as SummaryMode;
        resultParams.push([name, value]);
        continue;
      case '_elements':
        elements = [
          ...(elements ?? []),
          ...value
            .split(',')
            .map((e) => e.trim())
            .filter(Boolean),
        ];
        resultParams.push([name, value]);
        continue;
      case '_include':
      case '_revinclude': {
        const include = parseInclude(name, value);
        const same = (i: IncludeDirective) =>
          i.reverse === include.reverse && i.iterate === include.iterate && i.value === include.value;
        if (!includes.some(same)) includes.push(include);
        if (includes.length > LIMITS.includes)
          tooCostly(name, `_include and _revinclude are limited to ${LIMITS.includes} directives`);
        resultParams.push([name, value]);
        continue;
      }
      case '_cursor':
        cursor = value;
        continue;
      case '_type':
        types = [
          ...(types ?? []),
          ...value
            .split(',')
            .map((t) => t.trim())
            .filter(Boolean),
        ];
        resultParams.push([name, value]);
        continue;
    }
    if (value === '') {
      // https://hl7.org/fhir/R4/search.html: a parameter without a value is ignored (and reported).
      ignored.push({ name, reason: 'it has no value' });
      continue;
    }
    const values = [...new Set(splitUnescaped(value, ','))];
    if (values.length > LIMITS.orValues)
      tooCostly(name, `${name}: at most ${LIMITS.orValues} values separated by commas`);
    criteria.push({ name, key: parseParamKey(name), value, values });
  }
  if (summary && elements) fail('_elements', '_summary and _elements cannot be used together');
  if (criteria.length > LIMITS.criteria) {
    tooCostly(criteria[LIMITS.criteria].name, `A search is limited to ${LIMITS.criteria} search parameters`);
  }
  return {
    criteria,
    sort,
    count: count ?? parseCount(undefined),
    total,
    summary,
    elements,
    includes,
    cursor,
    types,
    resultParams,
    ignored,
  };
}
