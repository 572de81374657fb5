// How many index rows one resource may produce: the bound on what a single write costs. Rows are built
// in JavaScript (blocking the event loop) and written inside the write's transaction; without a bound a
// 16 MiB body of short names asked for millions of rows (10-19 s per write, the event loop blocked ~5 s).
// A resource past the bound is refused whole, never indexed in part: a partly indexed resource would be
// silently missing from searches that should find it. Design and numbers: docs/search.md, "Limits".
import { AppError } from '../errors.js';

/**
 * Most rows one resource version may add to the search index tables (idx_*, repeats counted once), and
 * separately to resource_link (one per distinct local reference). 100,000 admits the largest resources
 * seen in practice (a Group or List of tens of thousands of members, a ValueSet enumerating tens of
 * thousands of codes) and bounds a write to about a second on the machine in docs/search.md.
 */
export const MAX_INDEX_ROWS_PER_RESOURCE = 100_000;

/** The refusal of a resource that needs more than `limit` rows; `what` says which rows. */
export function tooManyIndexRows(resourceType: string, what: string, limit = MAX_INDEX_ROWS_PER_RESOURCE): AppError {
  const most = limit.toLocaleString('en-US');
  return new AppError(
    'too-many-index-rows',
    `This ${resourceType} needs more than ${most} ${what}; this server indexes at most ${most} per resource, so ` +
      'that every stored resource is found by every search that matches it. Nothing was stored: split the ' +
      'content over several resources.',
  );
}
