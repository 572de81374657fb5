// What an export reads: per type, the resources as they were at the job's transactionTime, walked in pk
// order a page at a time (a keyset, never OFFSET, never the whole type in memory).
//
// A resource changed after transactionTime is exported as the version it had then, read from its history
// (one indexed lookup, resource_history (pk, version)); one created after it, or deleted at it, is left
// out (https://hl7.org/fhir/uv/bulkdata/STU2/export.html#response---complete-status: the output holds
// the data as of transactionTime). `_since` keeps the versions changed after it. The selection (the
// compartment, `_typeFilter`) is evaluated on the current index rows.
import { contentLeftOut, INLINE_CONTENT_BYTES, pageContentColumns } from '../storage/page-content.js';
import type { Dialect } from '../storage/sql/dialect.js';
import { and, or, raw, Sql, sql } from '../search/sql/fragment.js';

/**
 * Rows of one page: with the contents over 64 KiB left out of the page statement (page-content.ts) and
 * read one at a time, a page holds at most 250 × 64 KiB = 16 MiB.
 */
export const PAGE_ROWS = 250;

const CONTENT = new Sql(pageContentColumns('r0'), [INLINE_CONTENT_BYTES]);

export interface SnapshotWindow {
  /** The job's transactionTime (epoch ms): versions at or before it. */
  readonly until: number;
  /** `_since` (epoch ms): versions changed after it; undefined: all. */
  readonly since?: number;
}

export interface PageRow {
  readonly pk: number | string;
  readonly last_updated: number | string;
  readonly deleted: number | string;
  readonly content: string | null;
  readonly content_bytes?: number | string | null;
}

export interface VersionRow {
  readonly last_updated: number | string;
  readonly operation: string;
  readonly content: string | null;
}

/**
 * The next page of `type` after `afterPk`: the rows current at `until` that match `window.since`, and
 * every row changed after `until` (its version at `until` is looked up afterwards). `selection` is a
 * condition over alias `r0` (compartment, filters), or undefined for all. Served by (type, pk).
 */
export function pageQuery(
  dialect: Dialect,
  type: string,
  selection: Sql | undefined,
  window: SnapshotWindow,
  afterPk: number,
  limit = PAGE_ROWS,
): Sql {
  const current =
    window.since === undefined
      ? sql`r0.deleted = 0`
      : and([sql`r0.deleted = 0`, sql`r0.last_updated > ${window.since}`]);
  const visible = or([current, sql`r0.last_updated > ${window.until}`]);
  const where = and([sql`r0.type = ${type}`, sql`r0.pk > ${afterPk}`, visible, selection ?? raw('1=1')]);
  return sql`${raw(dialect.adhocStatement)}SELECT r0.pk, r0.last_updated, r0.deleted, ${CONTENT} FROM resource r0 WHERE ${where} ORDER BY r0.pk LIMIT ${limit}`;
}

/** The version of resource `pk` at `until`: its latest history row not after it. */
export function versionAtQuery(pk: number, until: number): Sql {
  return sql`SELECT last_updated, operation, content FROM resource_history WHERE pk = ${pk} AND last_updated <= ${until} ORDER BY version DESC LIMIT 1`;
}

/**
 * What to write for a page row: its content, `history` when its version at `until` must be looked up
 * first (it changed since, or its content was too large for the page: its history holds the same
 * version, and stays as it is while the page is written), or undefined when it is not part of the
 * snapshot (pure).
 */
export function rowContent(row: PageRow, window: SnapshotWindow): string | 'history' | undefined {
  if (Number(row.last_updated) > window.until) return 'history';
  if (Number(row.deleted) === 0 && contentLeftOut(row)) return 'history';
  if (Number(row.deleted) !== 0 || row.content === null) return undefined;
  return row.content;
}

/** The content of a version found by versionAtQuery, or undefined when it is not exported (pure). */
export function versionContent(version: VersionRow | undefined, window: SnapshotWindow): string | undefined {
  if (!version || version.operation === 'delete' || version.content === null) return undefined;
  if (window.since !== undefined && Number(version.last_updated) <= window.since) return undefined;
  return version.content;
}
