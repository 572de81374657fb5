// The cost limits of one search (README "Limits", docs/security.md), checked before anything runs so
// that no search can ask for unbounded work: counts the parser sees (parse.ts) and joins the plan makes
// (checkCost). Beyond one: 422 with issue type `too-costly` (CONTRACT.md), naming the limit. A search
// within them can still be slow on a large database; the time budget (AMBIENT_SEARCH_TIMEOUT_MS)
// stops that one.
import { AppError } from '../errors.js';
import type { SearchRequest } from './parse.js';
import type { Plan } from './plan.js';

export const SEARCH_LIMITS = {
  /** Search parameters (criteria) in one search. */
  criteria: 32,
  /** Comma-separated values of one parameter. */
  valuesPerCriterion: 1000,
  /** Values of all parameters together. */
  valuesPerSearch: 2000,
  /** Links of one chain or `_has` (`subject:Patient.organization.name` has 2). */
  chainDepth: 4,
  /** Chained and `_has` parameters in one search (each is a join per candidate row). */
  joins: 8,
  /** `_sort` keys. */
  sortKeys: 8,
  /** `_include` and `_revinclude` directives. */
  includes: 16,
} as const;

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
  const joins = plan.criteria.filter((c) => c.kind === 'chain' || c.kind === 'has').length;
  if (joins > SEARCH_LIMITS.joins) {
    tooCostly(`A search may have at most ${SEARCH_LIMITS.joins} chained or _has parameters; this one has ${joins}`);
  }
}
