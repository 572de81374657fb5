// Stage 4 of the search pipeline: run the page query, then the includes, and assemble the Bundle from
// the stored JSON text of each resource (never parsed on the way out unless _summary/_elements ask, or
// Location `near` for the distance of each match).
// https://hl7.org/fhir/R4/search.html, https://hl7.org/fhir/R4/bundle.html#searchset
import type { R4Registry } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { fitPage } from '../storage/page-content.js';
import type { ByteBudget, FittedPage, PagedContent } from '../storage/page-content.js';
import type { BundleEntry, BundleLink } from '../fhir/bundle.js';
import { bundleJson } from '../fhir/bundle.js';
import type { FhirResponse } from '../fhir/response.js';
import type { SqlValue } from '../storage/sql/database.js';
import type { Dialect } from '../storage/sql/dialect.js';
import { encodeCursor } from './cursor.js';
import type { CursorPosition } from './cursor.js';
import { subsetter } from '../fhir/elements.js';
import type { StatementRunner } from './estimate.js';
import type { SearchRequest } from './parse.js';
import type { Plan } from './plan.js';
import { bindInclude, MAX_INCLUDED, withLimit } from './sql/compile.js';
import type { CompiledInclude, CompiledSearch } from './sql/compile.js';
import { sql } from './sql/fragment.js';
import type { Sql } from './sql/fragment.js';
import { positionOf } from './params/position.js';
import { distanceMetres } from './values/geo.js';
import type { GeoPoint } from './values/geo.js';
import { UCUM_SYSTEM } from './values/ucum.js';

/** Rounds of `:iterate` (beyond that: a warning). */
export const MAX_INCLUDE_ITERATIONS = 4;

/** A row of a page or include statement: its content is left out when large (page-content.ts). */
export interface Row extends PagedContent {
  pk: number;
  id: string;
  type: string;
  [key: string]: unknown;
}

/** A row whose content is there (fitPage fetched what the statement left out). */
type FullRow = Row & { content: string };

export interface ExecuteContext {
  readonly run: StatementRunner;
  /** Reads what the dialect's `_total=estimate` statement answers. */
  readonly dialect: Dialect;
  readonly registry: R4Registry;
  readonly baseUrl: string;
  readonly secret: string;
  /** Path of the search, relative to the base: `Patient`, or '' for a system search. */
  readonly path: string;
  /** The most bytes of stored resources one page carries, matches and includes (AMBIENT_MAX_PAGE_BYTES). */
  readonly maxPageBytes: number;
  /** May the caller see this Binary's content (its securityContext)? Others are left out of the page. */
  readonly mayReadBinary: (content: string) => boolean;
}

/** What a cursor is bound to: the search it pages through. */
export function queryKey(plan: Plan, path: string): string {
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

/**
 * Stage 4: runs the compiled statements (page, then includes, then the total) and assembles the Bundle.
 * `cursor` is the decoded position the page was compiled for (engine.ts decodes it before compiling).
 */
export async function executeSearch(
  ctx: ExecuteContext,
  request: SearchRequest,
  plan: Plan,
  compiled: CompiledSearch,
  cursor: CursorPosition | undefined,
): Promise<FhirResponse> {
  const run = (statement: Sql) => ctx.run(statement) as Promise<Row[]>;
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
    const [row] = await run(compiled.count!);
    const entries = issues.length ? [outcomeEntry(issues)] : [];
    return bundle({ total: Number(row.n), entries, links: [{ relation: 'self', url: link(ctx, plan) }] });
  }

  const count = request.count;
  const found: Row[] = [];
  for (const statement of compiled.page) {
    // A continuation reads only what the statements before it left of the page.
    found.push(
      ...(await run(found.length === 0 ? statement : withLimit(statement, compiled.pageLimit - found.length))),
    );
    if (found.length > count) break;
  }
  // The page ends early where its bytes run out (the first match always comes, so paging moves on).
  const budget: ByteBudget = { remaining: ctx.maxPageBytes };
  const fetch = (row: Row) => contentOf(run, row);
  const fitted = await fitPage(found.slice(0, count), budget, fetch, true);
  if (fitted.rows.length === 0 && found.length > 0) {
    throw new AppError(
      'database-unavailable',
      'A read replica has not yet replayed a resource of this page; retry the search shortly',
    );
  }
  const rows = fitted.rows as FullRow[];
  const more = found.length > count || fitted.cut !== undefined;
  if (cursor?.backwards) rows.reverse();

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

  const included = await includes(run, compiled.includes, rows, issues, budget);
  // A Binary's securityContext lives in its content, read here: one the caller may not see is left out
  // (the links above still page past it; counted totals still count it).
  const shown = (r: FullRow) => r.type !== 'Binary' || ctx.mayReadBinary(r.content);
  const matched = rows.filter(shown);
  const added = included.filter(shown);

  let total: number | undefined;
  if (compiled.count) {
    const [row] = await run(compiled.count);
    total = Number(row.n);
  } else if (compiled.estimate) {
    total = await estimate(run, ctx.dialect, compiled.estimate);
  } else if (request.total !== 'none' && !cursor && !more) {
    // The whole result is on this first page: the total costs nothing.
    total = matched.length;
  }

  const shape = subsetter(ctx.registry, request.summary, request.elements);
  const entry = (row: FullRow, mode: 'match' | 'include'): BundleEntry => ({
    fullUrl: `${ctx.baseUrl}/${row.type}/${row.id}`,
    resourceText: shape ? shape(row.content, row.type) : row.content,
    search: mode === 'match' && plan.distanceFrom ? distanceSearch(row, plan.distanceFrom) : { mode },
  });
  const entries = [...matched.map((r) => entry(r, 'match')), ...added.map((r) => entry(r, 'include'))];
  if (issues.length) entries.push(outcomeEntry(issues));
  // The audit trail names every resource a search returned, matches and includes alike.
  const accessed = [...matched, ...added].map((r) => `${r.type}/${r.id}`);
  return { ...bundle({ total, entries, links }), accessed };
}

/**
 * A `near` match's entry.search: the distance to the nearest of the search's points, in metres, as the
 * location-distance extension (https://hl7.org/fhir/R4/extension-location-distance.html). Reading it
 * costs parsing the match (a Location, small); one without a position (matched by another `near` value's
 * `:missing`, say) gets none.
 */
function distanceSearch(row: FullRow, from: readonly GeoPoint[]): Record<string, unknown> {
  const position =
    row.type === 'Location' ? positionOf((JSON.parse(row.content) as { position?: unknown }).position) : undefined;
  if (!position) return { mode: 'match' };
  const metres = Math.min(...from.map((point) => distanceMetres(point, position)));
  return {
    extension: [
      {
        url: 'http://hl7.org/fhir/StructureDefinition/location-distance',
        valueDistance: { value: Math.round(metres * 10) / 10, unit: 'm', system: UCUM_SYSTEM, code: 'm' },
      },
    ],
    mode: 'match',
  };
}

function bundle(parts: { total?: number; entries: BundleEntry[]; links: BundleLink[] }): FhirResponse {
  return {
    status: 200,
    body: bundleJson({ type: 'searchset', total: parts.total, link: parts.links, entries: parts.entries }),
  };
}

async function estimate(
  run: (statement: Sql) => Promise<Row[]>,
  dialect: Dialect,
  compiled: NonNullable<CompiledSearch['estimate']>,
): Promise<number | undefined> {
  const [row] = await run(compiled.statement);
  const method = dialect.totalEstimate;
  if (compiled.kind === 'explain' && method.kind === 'explain') return method.rows(row);
  const n = Number(row.n);
  return compiled.kind === 'capped' && n > compiled.cap ? undefined : n;
}

/**
 * The content the page statement left out of `row`: its version's, from the history (which never
 * changes, so it is the very content matched and as long as counted); undefined if this read's replica
 * has not replayed it yet.
 */
async function contentOf(run: (statement: Sql) => Promise<Row[]>, row: Row): Promise<string | undefined> {
  const [version] = await run(
    sql`SELECT content FROM resource_history WHERE pk = ${row.pk} AND version = ${Number(row.content_version)}`,
  );
  return version?.content ?? undefined;
}

/**
 * _include / _revinclude for the page's matches (and, with :iterate, for what they bring in), one
 * query per directive and round, at most MAX_INCLUDED resources and what is left of the page's byte
 * budget once the matches have spent theirs; matches never count against the cap and are never dropped
 * to make room.
 */
async function includes(
  run: (statement: Sql) => Promise<Row[]>,
  directives: readonly CompiledInclude[],
  matches: readonly FullRow[],
  issues: { severity: string; code: string; diagnostics: string }[],
  budget: ByteBudget,
): Promise<FullRow[]> {
  if (directives.length === 0 || matches.length === 0) return [];
  const seen = new Set(matches.map((r) => r.pk));
  const out: FullRow[] = [];
  let frontier: readonly FullRow[] = matches;
  for (let round = 0; frontier.length > 0; round++) {
    const active = directives.filter((d) => round === 0 || d.iterate);
    if (active.length === 0) break;
    if (round > MAX_INCLUDE_ITERATIONS) {
      issues.push({
        severity: 'warning',
        code: 'too-costly',
        diagnostics: `_include:iterate and _revinclude:iterate stop after ${MAX_INCLUDE_ITERATIONS} rounds; resources further away were left out`,
      });
      break;
    }
    const added: FullRow[] = [];
    for (const include of active) {
      const keys = frontierKeys(include, frontier);
      if (keys.length === 0) continue;
      const limit = MAX_INCLUDED - out.length - added.length + 1;
      const rows = await run(bindInclude(include, keys, limit));
      // Rows already on the page count against the statement's limit too: one that reached it may have
      // left rows out even when fewer than the cap are new.
      let capped = rows.length >= limit;
      const fresh: Row[] = [];
      for (const row of rows) {
        if (seen.has(row.pk)) continue;
        if (out.length + added.length + fresh.length >= MAX_INCLUDED) {
          capped = true;
          break;
        }
        seen.add(row.pk);
        fresh.push(row);
      }
      const fitted = await fitIncluded(run, fresh, budget, issues);
      added.push(...fitted.rows);
      if (fitted.cut) return [...out, ...added];
      if (capped) {
        issues.push({
          severity: 'warning',
          code: 'too-costly',
          diagnostics: `Included resources were capped at ${MAX_INCLUDED} for this page; use a smaller _count to get them all`,
        });
        return [...out, ...added];
      }
    }
    out.push(...added);
    frontier = added;
  }
  return out;
}

/** The included rows that fit in the page's byte budget (a warning when some do not). */
async function fitIncluded(
  run: (statement: Sql) => Promise<Row[]>,
  rows: readonly Row[],
  budget: ByteBudget,
  issues: { severity: string; code: string; diagnostics: string }[],
): Promise<FittedPage<FullRow>> {
  const fitted = (await fitPage(rows, budget, (row) => contentOf(run, row), false)) as FittedPage<FullRow>;
  if (fitted.cut === 'unreadable') {
    issues.push({
      severity: 'warning',
      code: 'transient',
      diagnostics:
        'Included resources were cut where a read replica had not yet replayed one of them; repeat the search shortly to get them all',
    });
  } else if (fitted.cut === 'budget') {
    issues.push({
      severity: 'warning',
      code: 'too-costly',
      diagnostics:
        'Included resources were cut where this page reached its limit of bytes (AMBIENT_MAX_PAGE_BYTES); use a smaller _count to get them all',
    });
  }
  return fitted;
}

/** The frontier rows a directive follows: pks of its source types, or (type, id) of its target types. */
function frontierKeys(include: CompiledInclude, frontier: readonly Row[]): (number | [string, string])[] {
  const follows = (row: Row) => include.from === 'any' || include.from.includes(row.type);
  const rows = frontier.filter(follows);
  return include.reverse ? rows.map((r) => [r.type, r.id] as [string, string]) : rows.map((r) => r.pk);
}
