// Pages of resources are bounded by their bytes as well as by their count: `_count` goes up to 1,000
// and a resource up to AMBIENT_MAX_BODY_BYTES, so a page read whole could need gigabytes. A page
// statement selects each row's content only when it is small (and its length and version always: both
// databases read the length from the value's header without loading the value); the reader then
// fetches the large ones one at a time, as the version the statement saw (history rows never change, so
// the length counted is the length fetched), while the page's byte budget allows, and ends the page
// early where it does not (the keyset cursors continue after the last row returned, so an early end
// costs nothing). A page statement itself holds at most its row limit × its inline limit
// (inlineContentBytes): about the page's byte budget, so a large `_count` does not multiply it; the
// statements of one page together read at most a page of rows (search/sql/compile.ts: withLimit).

/** Content larger than this comes out of a page statement as NULL, to be fetched on its own. */
export const INLINE_CONTENT_BYTES = 64 * 1024;

/**
 * The least inline limit: below it a page of many small resources would fetch each of them on its own.
 * A page statement of n rows then holds at most the larger of its budget and n × 4 KiB.
 */
export const MIN_INLINE_CONTENT_BYTES = 4 * 1024;

/**
 * The inline limit of a statement of up to `rows` rows whose page may carry `budgetBytes`: the budget's
 * share per row, rounded down to a power of two between MIN_INLINE_CONTENT_BYTES and
 * INLINE_CONTENT_BYTES. A statement of 1,001 rows under the default 32 MiB inlines up to 32 KiB each.
 */
export function inlineContentBytes(budgetBytes: number, rows: number): number {
  const share = budgetBytes / Math.max(1, rows);
  let inline = INLINE_CONTENT_BYTES;
  while (inline > MIN_INLINE_CONTENT_BYTES && inline > share) inline /= 2;
  return inline;
}

/**
 * The content columns of a page statement for table alias `alias` (`resource` or `resource_history`):
 * `content` (NULL when larger than the statement's inline limit), `content_bytes` (its length in bytes;
 * NULL when there is no content) and `content_version` (the version it is the content of). One `?`: the
 * inline limit (inlineContentBytes), bound as the statement's first parameter where the columns come
 * first in its text.
 */
export function pageContentColumns(alias: string): string {
  const column = `${alias}.content`;
  return `CASE WHEN octet_length(${column}) <= ? THEN ${column} END AS content, octet_length(${column}) AS content_bytes, ${alias}.version AS content_version`;
}

/** A row of a page statement, as pageContentColumns selects its content. */
export interface PagedContent {
  content: string | null;
  readonly content_bytes?: number | string | null;
  readonly content_version?: number | string;
}

/** Whether the page statement left the row's content out (too large to come inline). */
export function contentLeftOut(row: PagedContent): boolean {
  return row.content === null && row.content_bytes !== null && row.content_bytes !== undefined;
}

/** What is left of a page's byte budget; the page's statements spend it in turn (matches, then includes). */
export interface ByteBudget {
  remaining: number;
}

export interface FittedPage<R> {
  /** The leading rows that fit, each with its content. */
  readonly rows: R[];
  /** Why rows were left out, if they were: the budget ran out, or `fetch` could not read a content. */
  readonly cut?: 'budget' | 'unreadable';
}

/**
 * The leading rows of `rows` whose contents fit in `budget` (spent by what is taken), with the contents
 * the page statement left out fetched by `fetch` (the row's version, whose length the statement gave),
 * one at a time and only for rows that fit. With `atLeastOne`, the first row comes whatever its size, so
 * that paging always moves on. Where `fetch` cannot read a content (a read replica behind the one that
 * answered the page statement), the page ends before that row: the next page starts with it.
 */
export async function fitPage<R extends PagedContent>(
  rows: readonly R[],
  budget: ByteBudget,
  fetch: (row: R) => Promise<string | undefined>,
  atLeastOne: boolean,
): Promise<FittedPage<R>> {
  const out: R[] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const bytes = Number(row.content_bytes ?? 0);
    const first = atLeastOne && out.length === 0;
    if (bytes > budget.remaining && !first) return { rows: out, cut: 'budget' };
    if (contentLeftOut(row)) {
      const content = await fetch(row);
      if (content === undefined) return { rows: out, cut: 'unreadable' };
      row.content = content;
    }
    budget.remaining -= bytes;
    out.push(row);
  }
  return { rows: out };
}
