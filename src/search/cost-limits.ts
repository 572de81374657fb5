// The cost limits of one search (docs/search.md "Limits", docs/security.md), checked before anything runs so
// that no search can ask for unbounded work: counts the parser sees (parse.ts) and joins the plan makes
// (checkCost). Beyond one: 422 with issue type `too-costly` (docs/api.md), naming the limit. A search
// within them can still be slow on a large database; the time budget (AMBIENT_SEARCH_TIMEOUT_MS)
// stops that one.
import { AppError } from '../errors.js';
import type { SearchRequest } from './parse.js';
import type { Plan, PlannedCriterion } from './plan.js';

export const SEARCH_LIMITS = {
  /** Search parameters (criteria) in one search. */
  criteria: 32,
  /** Comma-separated values of one parameter. */
  valuesPerCriterion: 1000,
  /** Values of all parameters together. */
  valuesPerSearch: 2000,
  /**
   * Values matched as a range or a pattern (RowMatch.rangeValues: `:text`, `:contains`, string
   * prefixes, dates, numbers, quantities, `:below`), all parameters together, chains included. A
   * criterion that cannot drive the query is evaluated on every candidate row, once per value: on
   * 150,000 Observations each such value cost 10-30 ms, so 1,000 + 1,000 `:text` values ran out the
   * 10 s budget on both databases (docs/search.md, "Limits").
   */
  rangeValuesPerSearch: 32,
  /** Links of one chain or `_has` (`subject:Patient.organization.name` has 2). */
  chainDepth: 4,
  /** Chained and `_has` parameters in one search (each is a join per candidate row). */
  joins: 8,
  /** `_sort` keys. */
  sortKeys: 8,
  /** `_include` and `_revinclude` directives. */
  includes: 16,
} as const;

/** The values of `c` (a chain's or `_has`'s inner criterion included) matched as a range or a pattern. */
function rangeValuesOf(c: PlannedCriterion): number {
  switch (c.kind) {
    case 'rows':
      return c.match.rangeValues ?? 0;
    case 'composite':
      // Each alternative joins its components' rows and compares their ranges.
      return c.alternatives.length;
    case 'chain':
    case 'has':
    case 'forTypes':
    case 'exceptResource':
      return rangeValuesOf(c.inner);
    default:
      return 0;
  }
}

function tooCostly(message: string): never {
  throw new AppError('search-too-costly', message);
}

/** Refuses, before it runs, a plan beyond SEARCH_LIMITS (422 too-costly); parse.ts checks the counts. */
export function checkCost(request: SearchRequest, plan: Plan): void {
  const values = request.criteria.reduce((sum, c) => sum + c.values.length, 0);
  if (values > SEARCH_LIMITS.valuesPerSearch) {
    tooCostly(
      `A search may have at most ${SEARCH_LIMITS.valuesPerSearch} values in all its parameters; this one has ${values}`,
    );
  }
  const rangeValues = plan.criteria.reduce((sum, c) => sum + rangeValuesOf(c), 0);
  if (rangeValues > SEARCH_LIMITS.rangeValuesPerSearch) {
    tooCostly(
      `A search may have at most ${SEARCH_LIMITS.rangeValuesPerSearch} values matched as a range or a pattern (:text, :contains, strings, dates, numbers, quantities, :below) in all its parameters; this one has ${rangeValues}`,
    );
  }
  const joins = plan.criteria.filter((c) => c.kind === 'chain' || c.kind === 'has').length;
  if (joins > SEARCH_LIMITS.joins) {
    tooCostly(`A search may have at most ${SEARCH_LIMITS.joins} chained or _has parameters; this one has ${joins}`);
  }
}
