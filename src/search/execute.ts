// Stage 4 of the search pipeline: run the page query, then the includes, and assemble the Bundle from
// the stored JSON text of each resource (never parsed on the way out unless _summary/_elements ask).
// https://hl7.org/fhir/R4/search.html, https://hl7.org/fhir/R4/bundle.html#searchset
import type { R4Registry } from '../definitions/registry.js';
import type { BundleEntry, BundleLink } from '../fhir/bundle.js';
import { bundleJson } from '../fhir/bundle.js';
import type { FhirResponse } from '../fhir/response.js';
import type { SqlDatabase, SqlValue } from '../storage/sql/database.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import type { CursorPosition } from './cursor.js';
import { subsetter } from './elements.js';
import type { SearchRequest } from './parse.js';
import type { Plan, PlannedInclude } from './plan.js';
import { compileCount, compileInclude, compileMatches, compileSearch } from './sql/compile.js';
import type { Sql } from './sql/fragment.js';

/** Most resources a page adds through _include/_revinclude (beyond that: a warning, not an error). */
export const MAX_INCLUDED = 1000;
/** Rounds of `:iterate`. */
export const MAX_INCLUDE_ITERATIONS = 4;
/** `_total=estimate` on SQLite counts exactly up to this many matches, and leaves the total out above. */
export const ESTIMATE_COUNT_CAP = 10_000;

interface Row {
  pk: number;
  id: string;
  type: string;
  content: string;
  [key: string]: unknown;
}

export interface ExecuteContext {
  readonly db: SqlDatabase;
  readonly registry: R4Registry;
  readonly baseUrl: string;
  readonly secret: string;
  /** Path of the search, relative to the base: `Patient`, or '' for a system search. */
  readonly path: string;
}

function run(db: SqlDatabase, statement: Sql): Promise<Row[]> {
  return db.query<Row>(statement.text, statement.params);
}

function queryKey(plan: Plan, path: string): string {
  return JSON.stringify([path, plan.types, plan.linkParams]);
}

function link(ctx: ExecuteContext, plan: Plan, cursor?: string): string {
  const query = new URLSearchParams();
  for (const [name, value] of plan.linkParams) query.append(name, value);
  if (cursor) query.append('_cursor', cursor);
  const text = query.toString();
  const base = ctx.path ? `${ctx.baseUrl}/${ctx.path}` : ctx.baseUrl;
  return text ? `${base}?${text}` : base;
}

function outcomeEntry(
  issues: { severity: string; code: string; diagnostics: string; expression?: string[] }[],
): BundleEntry {
  return {
    resourceText: JSON.stringify({ resourceType: 'OperationOutcome', issue: issues }),
    search: { mode: 'outcome' },
  };
}

export async function executeSearch(ctx: ExecuteContext, request: SearchRequest, plan: Plan): Promise<FhirResponse> {
  const { db } = ctx;
  const key = queryKey(plan, ctx.path);
  const issues: { severity: string; code: string; diagnostics: string; expression?: string[] }[] = plan.ignored.map(
    (i) => ({
      severity: 'warning',
      code: 'not-supported',
      diagnostics: `Search parameter ${i.name} was ignored: ${i.reason}`,
      expression: [i.name],
    }),
  );

  if (request.summary === 'count') {
    const [row] = await run(db, compileCount(plan, db.dialect));
    const entries = issues.length ? [outcomeEntry(issues)] : [];
    return bundle(ctx, plan, { total: Number(row.n), entries, links: [{ relation: 'self', url: link(ctx, plan) }] });
  }

  const cursor: CursorPosition | undefined = request.cursor ? decodeCursor(ctx.secret, request.cursor, key) : undefined;
  const count = request.count;
  let rows: Row[] = [];
  let more = false;
  if (count > 0) {
    const page = compileSearch(plan, db.dialect, {
      limit: count + 1,
      position: cursor?.position,
      backwards: cursor?.backwards,
    });
    for (const statement of [page, ...page.continuation]) {
      rows.push(...(await run(db, statement)));
      if (rows.length > count) break;
    }
    more = rows.length > count;
    rows = rows.slice(0, count);
    if (cursor?.backwards) rows.reverse();
  }

  // Links: keyset positions of the first and last rows of this page.
  const positionOf = (row: Row): SqlValue[] => [...plan.sort.map((_, i) => row[`s${i}`] as SqlValue), row.pk];
  const links: BundleLink[] = [
    { relation: 'self', url: link(ctx, plan, request.cursor) },
    { relation: 'first', url: link(ctx, plan) },
  ];
  if (rows.length > 0) {
    const hasNext = cursor?.backwards ? true : more;
    const hasPrevious = cursor?.backwards ? more : cursor !== undefined;
    if (hasPrevious) {
      links.push({
        relation: 'previous',
        url: link(ctx, plan, encodeCursor(ctx.secret, { position: positionOf(rows[0]), backwards: true }, key)),
      });
    }
    if (hasNext) {
      links.push({
        relation: 'next',
        url: link(
          ctx,
          plan,
          encodeCursor(ctx.secret, { position: positionOf(rows[rows.length - 1]), backwards: false }, key),
        ),
      });
    }
  } else if (cursor) {
    // An empty page reached by a link: offer the way back.
    links.push({
      relation: 'previous',
      url: link(ctx, plan, encodeCursor(ctx.secret, { position: cursor.position, backwards: !cursor.backwards }, key)),
    });
  }

  let total: number | undefined;
  if (request.total === 'accurate') {
    const [row] = await run(db, compileCount(plan, db.dialect));
    total = Number(row.n);
  } else if (request.total === 'estimate') {
    total = await estimate(db, plan);
  } else if (request.total !== 'none' && !cursor && !more) {
    // The whole result is on this first page: the total costs nothing.
    total = rows.length;
  }

  const included = await includes(ctx, plan, rows, issues);
  const shape = subsetter(ctx.registry, request.summary, request.elements);
  const entry = (row: Row, mode: 'match' | 'include'): BundleEntry => ({
    fullUrl: `${ctx.baseUrl}/${row.type}/${row.id}`,
    resourceText: shape ? shape(row.content, row.type) : row.content,
    search: { mode },
  });
  const entries = [...rows.map((r) => entry(r, 'match')), ...included.map((r) => entry(r, 'include'))];
  if (issues.length) entries.push(outcomeEntry(issues));
  // The audit trail names every resource a search returned, matches and includes alike.
  const accessed = [...rows, ...included].map((r) => `${r.type}/${r.id}`);
  return { ...bundle(ctx, plan, { total, entries, links }), accessed };
}

function bundle(
  _ctx: ExecuteContext,
  _plan: Plan,
  parts: { total?: number; entries: BundleEntry[]; links: BundleLink[] },
): FhirResponse {
  return {
    status: 200,
    body: bundleJson({ type: 'searchset', total: parts.total, link: parts.links, entries: parts.entries }),
  };
}

async function estimate(db: SqlDatabase, plan: Plan): Promise<number | undefined> {
  if (db.dialect.name === 'postgres') {
    const matches = compileMatches(plan, db.dialect);
    const text = matches.text.replace(db.dialect.adhocStatement, `${db.dialect.adhocStatement}EXPLAIN (FORMAT JSON) `);
    const [row] = await db.query<Record<string, unknown>>(text, matches.params);
    const explained = Object.values(row)[0];
    const json = (typeof explained === 'string' ? JSON.parse(explained) : explained) as {
      Plan: { 'Plan Rows': number };
    }[];
    return Math.round(json[0].Plan['Plan Rows']);
  }
  const [row] = await run(db, compileCount(plan, db.dialect, ESTIMATE_COUNT_CAP + 1));
  const n = Number(row.n);
  return n > ESTIMATE_COUNT_CAP ? undefined : n;
}

/**
 * _include / _revinclude for the page's matches (and, with :iterate, for what they bring in), one
 * query per directive and round, at most MAX_INCLUDED resources; matches never count against the cap
 * and are never dropped to make room (a page's matches are exactly `_count`).
 */
async function includes(
  ctx: ExecuteContext,
  plan: Plan,
  matches: readonly Row[],
  issues: { severity: string; code: string; diagnostics: string }[],
): Promise<Row[]> {
  if (plan.includes.length === 0 || matches.length === 0) return [];
  const seen = new Set(matches.map((r) => r.pk));
  const out: Row[] = [];
  let frontier: readonly Row[] = matches;
  for (let round = 0; round <= MAX_INCLUDE_ITERATIONS && frontier.length > 0; round++) {
    const directives = plan.includes.filter((i) => round === 0 || i.directive.iterate);
    if (directives.length === 0) break;
    const added: Row[] = [];
    for (const include of directives) {
      const rows = await includeQuery(ctx, include, frontier, MAX_INCLUDED - out.length - added.length + 1);
      for (const row of rows) {
        if (seen.has(row.pk)) continue;
        if (out.length + added.length >= MAX_INCLUDED) {
          issues.push({
            severity: 'warning',
            code: 'too-costly',
            diagnostics: `Included resources were capped at ${MAX_INCLUDED} for this page; use a smaller _count to get them all`,
          });
          return [...out, ...added];
        }
        seen.add(row.pk);
        added.push(row);
      }
    }
    out.push(...added);
    frontier = added;
  }
  return out;
}

async function includeQuery(
  ctx: ExecuteContext,
  include: PlannedInclude,
  from: readonly Row[],
  limit: number,
): Promise<Row[]> {
  const targetType = include.directive.targetType;
  if (!include.directive.reverse) {
    const sources = from.filter((r) => include.sourceTypes.includes(r.type)).map((r) => r.pk);
    if (sources.length === 0) return [];
    return run(ctx.db, compileInclude(ctx.db.dialect, include, { pks: sources }, limit));
  }
  // _revinclude: resources of the source type whose parameter refers to one of `from`.
  const byType = new Map<string, string[]>();
  for (const row of from) {
    if (targetType && row.type !== targetType) continue;
    if (include.targetTypes.length > 0 && !include.targetTypes.includes(row.type)) continue;
    byType.set(row.type, [...(byType.get(row.type) ?? []), row.id]);
  }
  if (byType.size === 0) return [];
  return run(ctx.db, compileInclude(ctx.db.dialect, include, { targets: byType }, limit));
}
