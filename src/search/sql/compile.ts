// Stage 3 of the search pipeline: a Plan → one SQL statement with bound parameters (sql/fragment.ts).
//
// Shape: `SELECT ... FROM resource r0 WHERE r0.type = ? AND r0.deleted = 0 AND <criteria> ORDER BY ...
// LIMIT ?`. Each criterion is either
//   - the driver: `r0.pk IN (SELECT t.pk FROM idx_x t WHERE t.sp = ? AND <value>)`, an index range
//     scan whose pks are then looked up in the resource table; chosen for the most selective
//     criterion (plan.ts selectivity ≤ DRIVER_THRESHOLD), or
//   - a probe: `EXISTS (SELECT 1 FROM idx_x t WHERE t.pk = r0.pk AND t.sp = ? AND <value>)`, an
//     index lookup on (pk, sp) per candidate row.
// With no selective criterion the resource table is walked in pk order (the default sort) and each
// row probed, so a broad search stops after one page instead of materialising every match.
// PostgreSQL plans both forms as semi-joins from its statistics anyway; SQLite follows the form.
// Chains join idx_reference to resource on (type, id); `_has` the other way round.
import type { SqlValue } from '../../storage/sql/database.js';
import { inlineContentBytes, pageContentColumns } from '../../storage/page-content.js';
import type { Dialect } from '../../storage/sql/dialect.js';
import type { Plan, PlannedCriterion, PlannedInclude, PlannedSort } from '../plan.js';
import { and, equalsAny, join, list, or, raw, Sql, sql, withAlias } from './fragment.js';

/** Most resources a page adds through _include/_revinclude (beyond that: a warning, not an error). */
export const MAX_INCLUDED = 1000;

export const DRIVER_THRESHOLD = 2;
/**
 * Estimates (estimate.ts) count index rows up to this many. An index criterion matching more does not
 * drive: reading all its matches would cost more than walking the type in page order and probing each
 * row, which stops after a page. Up to here driving is cheap: the driver's pks come from one index
 * range (about 0.15 µs each on SQLite) and only a page of resources is read.
 */
export const ESTIMATE_CAP = 10_000;
/**
 * A `_has` drives only when its inner criterion matches at most this many rows: each inner match costs
 * a join (resource, then reference index) before the first result, ~50 times an index row. Above it
 * the target type is walked and probed (a `_has` on body height: 15 ms driven, 0.07 ms probed).
 */
export const JOIN_DRIVE_LIMIT = 1000;
/**
 * A chain fans out: each inner match (a Patient) brings all its referrers (its Observations), so it
 * drives only from fewer inner matches. Measured at 1M resources: `Observation?subject:Patient.name=Mül`
 * (839 Patients, 25,000 Observations) took 8.7 ms driven.
 */
export const CHAIN_DRIVE_LIMIT = 100;

/** `alias.sp = ?`; for a probe of one resource's rows, written so that only the (pk, sp) index serves it. */
function spCondition(alias: string, sps: readonly number[], probe?: Dialect): Sql {
  const column = raw(probe ? probe.probeColumn(`${alias}.sp`) : `${alias}.sp`);
  return sps.length === 1 ? sql`${column} = ${sps[0]}` : sql`${column} IN ${list(sps)}`;
}

function typeCondition(alias: string, types: readonly string[]): Sql {
  return types.length === 1 ? sql`${raw(alias)}.type = ${types[0]}` : sql`${raw(alias)}.type IN ${list(types)}`;
}

/** A boolean condition on the resource row `outer` (alias of the resource table at nesting `depth`). */
export function criterionCondition(d: Dialect, c: PlannedCriterion, outer: string, depth: number): Sql {
  const o = raw(outer);
  switch (c.kind) {
    case 'id':
      return c.ids.length === 0
        ? raw('1=0')
        : equalsAny(
            d,
            [`${outer}.id`],
            c.ids.map((id) => [id]),
          );
    case 'lastUpdated':
      return c.condition(`${outer}.last_updated`);
    case 'rows': {
      const exists = sql`EXISTS (SELECT 1 FROM ${raw(c.table)} t WHERE t.pk = ${o}.pk AND ${spCondition('t', c.sps, d)} AND ${c.match.condition}${raw(d.probeSuffix)})`;
      return c.match.negated ? sql`NOT ${exists}` : exists;
    }
    case 'missing': {
      const exists = sql`EXISTS (SELECT 1 FROM ${raw(c.table)} t WHERE t.pk = ${o}.pk AND ${spCondition('t', c.sps, d)}${raw(d.probeSuffix)})`;
      return c.missing ? sql`NOT ${exists}` : exists;
    }
    case 'composite': {
      const any = or(c.alternatives.map((parts) => compositeQuery(d, parts, sql`c0.pk = ${o}.pk`, 'SELECT 1', true)));
      return c.negated ? sql`NOT ${any}` : any;
    }
    case 'chain': {
      const f = `f${depth}`;
      const inner = `r${depth + 1}`;
      return sql`EXISTS (SELECT 1 FROM idx_reference ${raw(f)} JOIN resource ${raw(inner)} ON ${raw(inner)}.type = ${raw(f)}.target_type AND ${raw(inner)}.id = ${raw(f)}.target_id WHERE ${raw(f)}.pk = ${o}.pk AND ${spCondition(f, c.refSps, d)} AND ${typeCondition(inner, c.targetTypes)} AND ${raw(inner)}.deleted = 0 AND ${criterionCondition(d, c.inner, inner, depth + 1)}${raw(d.probeSuffix)})`;
    }
    case 'has': {
      const f = `f${depth}`;
      const inner = `r${depth + 1}`;
      return sql`EXISTS (SELECT 1 FROM idx_reference ${raw(f)} JOIN resource ${raw(inner)} ON ${raw(inner)}.pk = ${raw(f)}.pk WHERE ${spCondition(f, c.refSps)} AND ${raw(f)}.target_id = ${o}.id AND ${raw(f)}.target_type = ${o}.type AND ${raw(inner)}.deleted = 0 AND ${criterionCondition(d, c.inner, inner, depth + 1)}${raw(d.probeSuffix)})`;
    }
    case 'compartment': {
      const refers =
        c.refSps.length === 0
          ? raw('1=0')
          : sql`EXISTS (SELECT 1 FROM idx_reference t WHERE t.pk = ${o}.pk AND ${spCondition('t', c.refSps, d)} AND t.target_id = ${c.id} AND t.target_type = ${c.compartmentType}${raw(d.probeSuffix)})`;
      return c.selfType ? or([refers, and([sql`${o}.type = ${c.selfType}`, sql`${o}.id = ${c.id}`])]) : refers;
    }
    case 'forTypes':
      return or([sql`${o}.type NOT IN ${list(c.types)}`, criterionCondition(d, c.inner, outer, depth)]);
    case 'exceptResource':
      return or([
        and([sql`${o}.type = ${c.type}`, sql`${o}.id = ${c.id}`]),
        criterionCondition(d, c.inner, outer, depth),
      ]);
  }
}

/** `EXISTS (SELECT ... FROM <component 0> c0 JOIN <component 1> c1 ON same pk and grp ...)`, or its pk set. */
function compositeQuery(
  d: Dialect,
  parts: readonly { table: string; sps: readonly number[]; condition: Sql }[],
  correlation: Sql,
  select: string,
  exists: boolean,
): Sql {
  const joins = parts.slice(1).map((part, i) => {
    const alias = `c${i + 1}`;
    return sql` JOIN ${raw(part.table)} ${raw(alias)} ON ${raw(alias)}.pk = c0.pk AND ${raw(alias)}.grp = c0.grp AND ${spCondition(alias, part.sps, d)} AND ${withAlias(part.condition, alias)}`;
  });
  const first = parts[0];
  const where = and([
    correlation,
    spCondition('c0', first.sps, exists ? d : undefined),
    withAlias(first.condition, 'c0'),
  ]);
  const query = sql`${raw(select)} FROM ${raw(first.table)} c0${join(joins, '')} WHERE ${where}`;
  return exists ? sql`EXISTS (${query}${raw(d.probeSuffix)})` : query;
}

/** Can the criterion drive the query (a positive match on index rows)? */
function drivable(c: PlannedCriterion): boolean {
  if (c.kind === 'rows') return !c.match.negated;
  if (c.kind === 'composite') return !c.negated;
  return c.kind === 'chain' || c.kind === 'has' || c.kind === 'compartment';
}

/** Worth estimating and, unless the estimate is over its limit (driveLimit), driving from. */
export function driverCandidate(c: PlannedCriterion): boolean {
  return drivable(c) && c.selectivity <= DRIVER_THRESHOLD;
}

function driveLimit(c: PlannedCriterion): number {
  if (c.kind === 'chain') return CHAIN_DRIVE_LIMIT;
  return c.kind === 'has' ? JOIN_DRIVE_LIMIT : ESTIMATE_CAP;
}

/**
 * The criterion the query is driven from: the candidate with the fewest estimated rows (the most
 * selective by kind when not estimated), none when `_id` already picks the rows or every candidate is
 * estimated over its limit (ESTIMATE_CAP, JOIN_DRIVE_LIMIT).
 */
function chooseDriver(criteria: readonly PlannedCriterion[]): PlannedCriterion | undefined {
  if (criteria.some((c) => c.kind === 'id')) return undefined;
  const cost = (c: PlannedCriterion) => c.estimatedRows ?? c.selectivity;
  let driver: PlannedCriterion | undefined;
  for (const c of criteria) {
    if (!driverCandidate(c) || (c.estimatedRows ?? 0) > driveLimit(c)) continue;
    if (!driver || cost(c) < cost(driver)) driver = c;
  }
  return driver;
}

/** The pks of the resources (of `types`) matching a drivable criterion, from the index. */
function criterionSet(d: Dialect, c: PlannedCriterion, types: readonly string[], depth: number): Sql {
  switch (c.kind) {
    case 'rows':
      return sql`SELECT t.pk FROM ${raw(c.table)} t WHERE ${spCondition('t', c.sps)} AND ${c.match.condition}`;
    case 'composite':
      return join(
        c.alternatives.map((parts) => compositeQuery(d, parts, raw('1=1'), 'SELECT c0.pk', false)),
        ' UNION ',
      );
    case 'chain': {
      // Resources whose reference points at a target matching the inner criterion: the matching
      // targets' ids, then their referrers through (sp, target_id, target_type). With one target type
      // (the usual case) the ids are a plain list the driver form can use; with several, (type, id) pairs.
      const f = `f${depth}`;
      const inner = `r${depth + 1}`;
      if (c.targetTypes.length === 1) {
        const [type] = c.targetTypes;
        const ids = sql`SELECT ${raw(inner)}.id FROM resource ${raw(inner)} WHERE ${resourceFilter(d, [c.inner], inner, [type], depth + 1)}`;
        return sql`SELECT ${raw(f)}.pk FROM idx_reference ${raw(f)} WHERE ${spCondition(f, c.refSps)} AND ${raw(f)}.target_type = ${type} AND ${raw(f)}.target_id${raw(d.driver.open)}${ids}${raw(d.driver.close)}`;
      }
      const pairs = sql`SELECT ${raw(inner)}.type, ${raw(inner)}.id FROM resource ${raw(inner)} WHERE ${resourceFilter(d, [c.inner], inner, c.targetTypes, depth + 1)}`;
      return sql`SELECT ${raw(f)}.pk FROM idx_reference ${raw(f)} WHERE ${spCondition(f, c.refSps)} AND (${raw(f)}.target_type, ${raw(f)}.target_id) IN (${pairs})`;
    }
    case 'has': {
      // Targets of the references held by the source resources that match the inner criterion: the
      // ids the sources refer to, then those resources through (type, id).
      const f = `f${depth}`;
      const inner = `r${depth + 1}`;
      const target = `r${depth + 2}`;
      const sources = sql`SELECT ${raw(inner)}.pk FROM resource ${raw(inner)} WHERE ${resourceFilter(d, [c.inner], inner, [c.sourceType], depth + 1)}`;
      const targetTypes = c.targetTypes.filter((type) => types.includes(type));
      if (targetTypes.length === 0) return sql`SELECT ${raw(target)}.pk FROM resource ${raw(target)} WHERE 1=0`;
      if (targetTypes.length === 1) {
        const [type] = targetTypes;
        const ids = sql`SELECT ${raw(f)}.target_id FROM idx_reference ${raw(f)} WHERE ${spCondition(f, c.refSps, d)} AND ${raw(f)}.target_type = ${type} AND ${raw(f)}.pk${raw(d.driver.open)}${sources}${raw(d.driver.close)}`;
        return sql`SELECT ${raw(target)}.pk FROM resource ${raw(target)} WHERE ${raw(target)}.type = ${type} AND ${raw(target)}.id${raw(d.driver.open)}${ids}${raw(d.driver.close)}`;
      }
      const pairs = sql`SELECT ${raw(f)}.target_type, ${raw(f)}.target_id FROM idx_reference ${raw(f)} WHERE ${spCondition(f, c.refSps, d)} AND ${raw(f)}.pk IN (${sources})`;
      return sql`SELECT ${raw(target)}.pk FROM resource ${raw(target)} WHERE ${typeCondition(target, targetTypes)} AND (${raw(target)}.type, ${raw(target)}.id) IN (${pairs})`;
    }
    case 'compartment': {
      // The referrers through the (sp, target_id, target_type) index, and the compartment's own resource.
      const referrers = sql`SELECT t.pk FROM idx_reference t WHERE ${spCondition('t', c.refSps)} AND t.target_id = ${c.id} AND t.target_type = ${c.compartmentType}`;
      const self = c.selfType
        ? sql`SELECT s.pk FROM resource s WHERE s.type = ${c.selfType} AND s.id = ${c.id}`
        : undefined;
      if (c.refSps.length === 0) return self ?? sql`SELECT t.pk FROM idx_reference t WHERE 1=0`;
      return self ? sql`${referrers} UNION ALL ${self}` : referrers;
    }
    default:
      throw new Error(`criterion ${c.kind} cannot drive a query`);
  }
}

/**
 * The WHERE condition selecting resources of `types` (alias `alias`) that match every criterion: the
 * most selective drivable criterion as an IN (index range), the others as EXISTS probes.
 */
export function resourceFilter(
  d: Dialect,
  criteria: readonly PlannedCriterion[],
  alias: string,
  types: readonly string[],
  depth: number,
): Sql {
  const a = raw(alias);
  const driver = chooseDriver(criteria);
  // Several `_id`s drive too, through the (type, id) index: as a condition on the walked rows, SQLite
  // (no statistics, and not knowing how many ids the one list parameter holds) walked the whole type
  // in pk order to spare a sort (0.2 ms → 240 ms at 300,000 resources).
  const ids = criteria.find((c) => c.kind === 'id' && c.ids.length > 1);
  // A driver's pks are of the searched types already (a parameter id `sp` belongs to one type), and
  // without the type term both databases fetch the driver's pks through the primary key in pk order,
  // so the page stops early (with it PostgreSQL picked the (type, pk) index and sorted every match).
  const conditions: Sql[] =
    driver || ids ? [sql`${a}.deleted = 0`] : [typeCondition(alias, types), sql`${a}.deleted = 0`];
  for (const c of criteria) {
    if (c === driver)
      conditions.push(sql`${a}.pk${raw(d.driver.open)}${criterionSet(d, c, types, depth)}${raw(d.driver.close)}`);
    else if (c === ids) {
      const s = `s${depth}`;
      const set = sql`SELECT ${raw(s)}.pk FROM resource ${raw(s)} WHERE ${typeCondition(s, types)} AND ${criterionCondition(d, c, s, depth)}`;
      conditions.push(sql`${a}.pk${raw(d.driver.open)}${set}${raw(d.driver.close)}`);
    } else conditions.push(criterionCondition(d, c, alias, depth));
  }
  return and(conditions);
}

function sortExpression(d: Dialect, s: PlannedSort, alias: string): Sql {
  if (s.kind === 'column') return raw(`${alias}.${s.column}`);
  const fn = s.descending ? 'MAX' : 'MIN';
  const filter = s.filter ? sql` AND ${s.filter}` : raw('');
  return sql`(SELECT ${raw(fn)}(${s.column}) FROM ${raw(s.table)} t WHERE t.pk = ${raw(alias)}.pk AND ${spCondition('t', s.sps, d)}${filter})`;
}

export interface PageBounds {
  /** Rows to fetch (the page size + 1, to know whether there is more). */
  readonly limit: number;
  /** Keyset position: [...sort values, pk]. */
  readonly position?: readonly SqlValue[];
  /** Fetch the rows before `position` (a previous page), in reverse order. */
  readonly backwards?: boolean;
  /** Contents larger than this come out as NULL (page-content.ts: inlineContentBytes). */
  readonly inlineBytes: number;
}

/**
 * Strictly after (or before) `position` in the order (sort keys with NULLs last, then pk): for keys
 * k1..kn and values v1..vn, `k1 > v1 OR (k1 = v1 AND (k2 > v2 OR ...))`, with the NULL cases spelled out
 * when `nullable`.
 */
function keysetCondition(
  keys: readonly { expr: Sql; descending: boolean }[],
  values: readonly SqlValue[],
  pk: Sql,
  backwards: boolean,
  nullable = true,
): Sql {
  const build = (i: number): Sql => {
    if (i === keys.length) {
      const pkValue = values[values.length - 1];
      return backwards ? sql`${pk} < ${pkValue}` : sql`${pk} > ${pkValue}`;
    }
    const { expr, descending } = keys[i];
    const value = values[i];
    const rest = build(i + 1);
    if (value === null || value === undefined) {
      // NULLs come last: after a NULL only NULLs; before it every non-NULL.
      return backwards
        ? or([sql`${expr} IS NOT NULL`, and([sql`${expr} IS NULL`, rest])])
        : and([sql`${expr} IS NULL`, rest]);
    }
    const beyond = descending !== backwards ? sql`${expr} < ${value}` : sql`${expr} > ${value}`;
    const tie = and([sql`${expr} = ${value}`, rest]);
    if (!nullable) return or([beyond, tie]);
    return backwards ? and([sql`${expr} IS NOT NULL`, or([beyond, tie])]) : or([sql`${expr} IS NULL`, beyond, tie]);
  };
  return build(0);
}

const direction = (descending: boolean): string => (descending ? 'DESC' : 'ASC');

/**
 * The page query, as one or two statements run in turn until the page is full (pk, id, type, content
 * and the sort values `s0`... of each row). Four shapes:
 *  - no _sort: resources in pk order (the stable default);
 *  - _sort on _id/_lastUpdated only: the resource table in that order (its indexes serve it);
 *  - one _sort parameter and no selective criterion: the parameter's index rows in value order, one
 *    row per resource (its MIN or MAX), stopping after a page; then the resources without a value;
 *  - otherwise: every match with its sort values, sorted (cheap when a selective criterion drives).
 */
export function compileSearch(plan: Plan, dialect: Dialect, page: PageBounds): PageStatement {
  const [first, ...rest] = pageStatements(plan, dialect, page).map((statement) => {
    const limitParam = statement.params.indexOf(PAGE_LIMIT);
    if (limitParam < 0 || statement.params.lastIndexOf(PAGE_LIMIT) !== limitParam) {
      throw new Error('A page statement has one row limit');
    }
    return withLimit(Object.assign(statement, { limitParam }), page.limit);
  });
  return Object.assign(first, { continuation: rest });
}

/** Stands for a page statement's row limit until compileSearch binds it. */
const PAGE_LIMIT = '\u0000page-limit';

/** A page statement and the index of its row limit in its params. */
export type LimitedSql = Sql & { readonly limitParam: number };

/**
 * The statement with its row limit bound to `limit`: a continuation runs for the rows the statements
 * before it left, so that the page's statements together hold at most one page of rows.
 */
export function withLimit(statement: LimitedSql, limit: number): LimitedSql {
  const params = [...statement.params];
  params[statement.limitParam] = limit;
  return Object.assign(new Sql(statement.text, params), { limitParam: statement.limitParam });
}

/** A page query; when it returns less than a page, `continuation` runs next (NULLs-last phase). */
export type PageStatement = LimitedSql & { readonly continuation: readonly LimitedSql[] };

/** The content columns of table alias `alias`, contents over `inlineBytes` left out (page-content.ts). */
const contentColumns = (alias: string, inlineBytes: number): Sql => new Sql(pageContentColumns(alias), [inlineBytes]);

function pageStatements(plan: Plan, dialect: Dialect, page: PageBounds): Sql[] {
  const filter = resourceFilter(dialect, plan.criteria, 'r0', plan.types, 0);
  const backwards = page.backwards ?? false;
  const prefix = raw(dialect.adhocStatement);
  if (plan.sort.length === 0) {
    const keyset = page.position ? keysetCondition([], page.position, raw('r0.pk'), backwards) : raw('1=1');
    return [
      sql`${prefix}SELECT r0.pk, r0.id, r0.type, ${contentColumns('r0', page.inlineBytes)} FROM resource r0 WHERE ${filter} AND ${keyset} ORDER BY r0.pk ${raw(direction(backwards))} LIMIT ${PAGE_LIMIT}`,
    ];
  }
  if (plan.sort.every((s) => s.kind === 'column')) {
    const keys = plan.sort.map((s) => ({ expr: raw(`r0.${s.column}`), descending: s.descending }));
    const keyset = page.position ? keysetCondition(keys, page.position, raw('r0.pk'), backwards, false) : raw('1=1');
    const order = [
      ...keys.map((k) => `${k.expr.text} ${direction(k.descending !== backwards)}`),
      `r0.pk ${direction(backwards)}`,
    ];
    const values = keys.map((k, i) => `${k.expr.text} AS s${i}`).join(', ');
    return [
      sql`${prefix}SELECT r0.pk, r0.id, r0.type, ${contentColumns('r0', page.inlineBytes)}, ${raw(values)} FROM resource r0 WHERE ${filter} AND ${keyset} ORDER BY ${raw(order.join(', '))} LIMIT ${PAGE_LIMIT}`,
    ];
  }
  const only = plan.sort[0];
  if (plan.sort.length === 1 && only.kind === 'index' && only.sps.length === 1 && !hasDriver(plan.criteria)) {
    return streamedSort(dialect, plan, only, page);
  }
  const columns = plan.sort.map((s, i) => sql`${sortExpression(dialect, s, 'r0')} AS s${raw(String(i))}`);
  const keys = plan.sort.map((s, i) => ({ expr: raw(`q.s${i}`), descending: s.descending }));
  const keyset = page.position ? keysetCondition(keys, page.position, raw('q.pk'), backwards) : raw('1=1');
  const order = [
    ...keys.flatMap((k) => [
      `(${k.expr.text} IS NULL) ${direction(backwards)}`,
      `${k.expr.text} ${direction(k.descending !== backwards)}`,
    ]),
    `q.pk ${direction(backwards)}`,
  ].join(', ');
  const sortValues = keys.map((k) => k.expr.text).join(', ');
  return [
    sql`${prefix}SELECT r.pk, r.id, r.type, ${contentColumns('r', page.inlineBytes)}, ${raw(sortValues)} FROM (SELECT r0.pk AS pk, ${join(columns, ', ')} FROM resource r0 WHERE ${filter}) q JOIN resource r ON r.pk = q.pk WHERE ${keyset} ORDER BY ${raw(order)} LIMIT ${PAGE_LIMIT}`,
  ];
}

function hasDriver(criteria: readonly PlannedCriterion[]): boolean {
  return criteria.some((c) => c.kind === 'id') || chooseDriver(criteria) !== undefined;
}

/**
 * A single-parameter sort read from the parameter's index in value order. Each resource's key is the
 * MIN (ascending) or MAX (descending) of its rows; the NOT EXISTS keeps, per resource, the one row that
 * holds it (the tiebreak columns make that row unique), so the scan can stop after a page. Resources
 * without a value follow, in pk order (NULLs last), in a second statement.
 */
function streamedSort(d: Dialect, plan: Plan, s: Extract<PlannedSort, { kind: 'index' }>, page: PageBounds): Sql[] {
  const prefix = raw(d.adhocStatement);
  const backwards = page.backwards ?? false;
  const position = page.position;
  const inNullPhase = position !== undefined && (position[0] === null || position[0] === undefined);
  const filter = (alias: string) => (s.filter ? sql` AND ${withAlias(s.filter, alias)}` : raw(''));
  const key = [s.column, ...s.tiebreak];
  // `u` comes before `t` among one resource's rows.
  const before = (i: number): Sql => {
    const u = withAlias(key[i], 'u');
    const t = key[i];
    const first = s.descending ? sql`${u} > ${t}` : sql`${u} < ${t}`;
    return i === key.length - 1 ? first : or([first, and([sql`${u} = ${t}`, before(i + 1)])]);
  };
  const holder = sql`NOT EXISTS (SELECT 1 FROM ${raw(s.table)} u WHERE u.pk = t.pk AND ${spCondition('u', s.sps, d)}${filter('u')} AND ${before(0)}${raw(d.probeSuffix)})`;
  const filterR0 = resourceFilter(d, plan.criteria, 'r0', plan.types, 0);
  const valued = (keyset: Sql): Sql => {
    const order = `${s.column.text} ${direction(s.descending !== backwards)}, t.pk ${direction(backwards)}`;
    const inner = sql`SELECT t.pk AS pk, ${s.column} AS s0 FROM ${raw(s.table)} t JOIN resource r0 ON r0.pk = t.pk WHERE ${spCondition('t', s.sps)}${filter('t')} AND ${keyset} AND ${holder} AND ${filterR0} ORDER BY ${raw(order)} LIMIT ${PAGE_LIMIT}`;
    return sql`${prefix}SELECT r.pk, r.id, r.type, ${contentColumns('r', page.inlineBytes)}, q.s0 FROM (${inner}) q JOIN resource r ON r.pk = q.pk ORDER BY q.s0 ${raw(direction(s.descending !== backwards))}, q.pk ${raw(direction(backwards))}`;
  };
  const missing = (keyset: Sql): Sql =>
    sql`${prefix}SELECT r0.pk, r0.id, r0.type, ${contentColumns('r0', page.inlineBytes)}, NULL AS s0 FROM resource r0 WHERE ${filterR0} AND NOT EXISTS (SELECT 1 FROM ${raw(s.table)} u WHERE u.pk = r0.pk AND ${spCondition('u', s.sps, d)}${filter('u')}${raw(d.probeSuffix)}) AND ${keyset} ORDER BY r0.pk ${raw(direction(backwards))} LIMIT ${PAGE_LIMIT}`;
  const valueKeyset = (): Sql =>
    position && !inNullPhase
      ? keysetCondition([{ expr: s.column, descending: s.descending }], position, raw('t.pk'), backwards, false)
      : raw('1=1');
  const missingKeyset = (): Sql =>
    position && inNullPhase ? keysetCondition([], position, raw('r0.pk'), backwards) : raw('1=1');
  if (!backwards) return inNullPhase ? [missing(missingKeyset())] : [valued(valueKeyset()), missing(raw('1=1'))];
  return inNullPhase ? [missing(missingKeyset()), valued(raw('1=1'))] : [valued(valueKeyset())];
}

/**
 * How many index rows an index criterion (`rows` or `composite`) matches, counted up to `cap` + 1: an
 * index range scan that stops there, so it costs at most that many index entries.
 */
export function compileEstimate(d: Dialect, c: PlannedCriterion, cap: number): Sql {
  if (c.kind !== 'rows' && c.kind !== 'composite' && c.kind !== 'compartment')
    throw new Error(`criterion ${c.kind} is estimated from its parts`);
  return sql`${raw(d.adhocStatement)}SELECT COUNT(*) AS n FROM (${criterionSet(d, c, [], 0)} LIMIT ${cap + 1}) e`;
}

/** COUNT of every match, capped at `cap` rows when given (so an estimate never scans more). */
export function compileCount(plan: Plan, dialect: Dialect, cap?: number): Sql {
  const filter = resourceFilter(dialect, plan.criteria, 'r0', plan.types, 0);
  const prefix = raw(dialect.adhocStatement);
  if (cap === undefined) return sql`${prefix}SELECT COUNT(*) AS n FROM resource r0 WHERE ${filter}`;
  return sql`${prefix}SELECT COUNT(*) AS n FROM (SELECT 1 FROM resource r0 WHERE ${filter} LIMIT ${cap}) c`;
}

/** The matches of a search without paging (`column` of each: pk or id), for EXPLAIN, estimates and conditional references. */
export function compileMatches(plan: Plan, dialect: Dialect, column: 'pk' | 'id' = 'pk', limit?: number): Sql {
  const filter = resourceFilter(dialect, plan.criteria, 'r0', plan.types, 0);
  const query = sql`${raw(dialect.adhocStatement)}SELECT r0.${raw(column)} FROM resource r0 WHERE ${filter}`;
  return limit === undefined ? query : sql`${query} LIMIT ${limit}`;
}

/**
 * Conditional criteria resolved ahead of a write transaction (fhir/conditional.ts): the pk and id of up
 * to `limit` matches, and, in the same statement and so in the same snapshot, the last history `seq` it
 * saw, as a first row without pk (every write appends a history row, so what changed since is what
 * comes after that seq).
 */
export function compileMatchesAt(plan: Plan, dialect: Dialect, limit: number): Sql {
  const filter = resourceFilter(dialect, plan.criteria, 'r0', plan.types, 0);
  return sql`${raw(dialect.adhocStatement)}SELECT NULL AS pk, NULL AS id, (SELECT MAX(seq) FROM resource_history) AS seq
    UNION ALL SELECT * FROM (SELECT r0.pk, r0.id, NULL AS seq FROM resource r0 WHERE ${filter} LIMIT ${limit}) m`;
}

/**
 * The criteria again, inside the write transaction, on the `candidates` (pks) only: each candidate probed
 * by its primary key and its criteria checked on its own rows (no driver from the index), so the
 * statement costs a few probes per candidate, whatever the database holds.
 */
export function compileMatchesAmong(plan: Plan, dialect: Dialect, candidates: readonly number[], limit: number): Sql {
  return sql`SELECT r0.pk, r0.id FROM resource r0 WHERE ${amongCandidates(plan, dialect, candidates)} LIMIT ${limit}`;
}

/** The criteria on the `candidates` (pks) only, each probed by its primary key. */
function amongCandidates(plan: Plan, dialect: Dialect, candidates: readonly number[]): Sql {
  return and([
    sql`r0.pk IN (${new Sql(dialect.jsonIntegers, [JSON.stringify(candidates)])})`,
    typeCondition('r0', plan.types),
    sql`r0.deleted = 0`,
    ...plan.criteria.map((c) => criterionCondition(dialect, c, 'r0', 0)),
  ]);
}

/**
 * compileMatchesAmong for several plans over the same candidates in one statement: each match comes as
 * (m, pk), `m` the plan's index. Subscriptions of one type are matched this way, a few round trips for
 * any number of them.
 */
export function compileMatchesAmongMany(plans: readonly Plan[], dialect: Dialect, candidates: readonly number[]): Sql {
  const parts = plans.map(
    (plan, m) =>
      sql`SELECT ${raw(String(m))} AS m, r0.pk FROM resource r0 WHERE ${amongCandidates(plan, dialect, candidates)}`,
  );
  return join(parts, ' UNION ALL ');
}

/** Stand for the frontier and the row limit in a compiled include until the executor binds them. */
const FRONTIER = '\u0000frontier';
const FRONTIER_KEYS = '\u0000frontier-keys';
const LIMIT = '\u0000limit';

/**
 * One directive of _include (the resources the frontier's rows refer to through its parameters) or
 * _revinclude (the resources of the source types whose parameters refer to the frontier's rows),
 * compiled once; the executor binds the frontier (bindInclude) each round.
 */
export interface CompiledInclude {
  readonly reverse: boolean;
  readonly iterate: boolean;
  /**
   * Which of the frontier's rows the directive follows, by type: forward, rows of the source types
   * (their pks); reverse, rows of the types the parameters may refer to (their type and id). 'any': all.
   */
  readonly from: readonly string[] | 'any';
  readonly statement: Sql;
  /**
   * Indexes in `statement.params` of the frontier, a JSON array (forward: pks; reverse: ids), of the
   * reverse frontier's `Type/id` keys (-1 forward), and of the row limit.
   */
  readonly frontierParam: number;
  readonly keysParam: number;
  readonly limitParam: number;
}

/**
 * `inlineBytes`: contents larger than this come out as NULL (page-content.ts); an include statement
 * reads up to MAX_INCLUDED + 1 rows.
 */
export function compileInclude(dialect: Dialect, include: PlannedInclude, inlineBytes: number): CompiledInclude {
  const prefix = raw(dialect.adhocStatement);
  const { directive } = include;
  let pks: Sql;
  let from: readonly string[] | 'any';
  // Only the returned types, in SQL as chains do: a reference row of any other type (stored before its
  // target type was checked) never brings in a resource the caller may not search.
  const returned = include.returnedTypes;
  if (!directive.reverse) {
    const frontier = new Sql(dialect.jsonIntegers, [FRONTIER]);
    pks = sql`SELECT i.pk FROM idx_reference f JOIN resource i ON i.type = f.target_type AND i.id = f.target_id WHERE f.pk${raw(dialect.driver.open)}${frontier}${raw(dialect.driver.close)} AND ${spCondition('f', include.sps, dialect)} AND ${typeCondition('i', returned)}`;
    from = include.sourceTypes;
  } else {
    // The ids reach the (sp, target_id, target_type) index as a list (a list, not a join: PostgreSQL
    // estimates a JSON function at 100 rows and hashed the whole reference index against it); the
    // `Type/id` keys then keep exactly the frontier's pairs.
    const ids = new Sql(dialect.jsonTexts, [FRONTIER]);
    const keys = new Sql(dialect.jsonTexts, [FRONTIER_KEYS]);
    pks = sql`SELECT f.pk FROM idx_reference f WHERE ${spCondition('f', include.sps)} AND f.target_id${raw(dialect.driver.open)}${ids}${raw(dialect.driver.close)} AND f.target_type || '/' || f.target_id${raw(dialect.driver.open)}${keys}${raw(dialect.driver.close)}`;
    const targets = include.targetTypes;
    from = directive.targetType
      ? targets.length === 0 || targets.includes(directive.targetType)
        ? [directive.targetType]
        : []
      : targets.length > 0
        ? targets
        : 'any';
  }
  const types = directive.reverse ? sql` AND ${typeCondition('r', returned)}` : raw('');
  const statement = sql`${prefix}SELECT r.pk, r.id, r.type, ${contentColumns('r', inlineBytes)} FROM resource r WHERE r.pk IN (${pks}) AND r.deleted = 0${types} ORDER BY r.pk LIMIT ${LIMIT}`;
  return {
    reverse: directive.reverse,
    iterate: directive.iterate,
    from,
    statement,
    frontierParam: statement.params.indexOf(FRONTIER),
    keysParam: statement.params.indexOf(FRONTIER_KEYS),
    limitParam: statement.params.indexOf(LIMIT),
  };
}

/** The include's statement for one round: the frontier (pks, or [type, id] pairs) and the row limit bound. */
export function bindInclude(
  include: CompiledInclude,
  frontier: readonly (number | readonly [string, string])[],
  limit: number,
): Sql {
  const params = [...include.statement.params];
  if (include.keysParam < 0) {
    params[include.frontierParam] = JSON.stringify(frontier);
  } else {
    const pairs = frontier as readonly (readonly [string, string])[];
    params[include.frontierParam] = JSON.stringify([...new Set(pairs.map(([, id]) => id))]);
    params[include.keysParam] = JSON.stringify(pairs.map(([type, id]) => `${type}/${id}`));
  }
  params[include.limitParam] = limit;
  return new Sql(include.statement.text, params);
}

/** What the executor needs of the request to compile a search's statements. */
export interface SearchShape {
  /** Matches per page (`_count`); 0: none. */
  readonly count: number;
  readonly total?: 'none' | 'estimate' | 'accurate';
  /** `_summary=count`: only the total. */
  readonly summaryCount: boolean;
  /** Keyset position of a page reached through a link. */
  readonly position?: readonly SqlValue[];
  readonly backwards?: boolean;
  /** The most bytes of resources a page carries (AMBIENT_MAX_PAGE_BYTES): what each statement inlines. */
  readonly maxPageBytes: number;
}

/**
 * A search compiled once into every statement it may run (the style notes §5: parse → plan → compile →
 * execute). Plain data: the executor runs these in order, binding only an include's frontier, and never
 * calls back into the compiler, so the work can be shipped to the read workers as it is.
 */
export interface CompiledSearch {
  /** The page query and its continuation (the NULLs-last phase of a sort), run until the page is full. */
  readonly page: readonly LimitedSql[];
  /** Rows the page statements fetch (`_count` + 1, to know whether there is more); 0: none. */
  readonly pageLimit: number;
  /** Counts every match: `_total=accurate`, `_summary=count`. */
  readonly count?: Sql;
  /**
   * `_total=estimate`, as the dialect answers it (Dialect.totalEstimate): the planner's estimate read
   * from EXPLAIN (`explain`), or an exact count stopped at `cap` (`capped`, the total left out above it).
   */
  readonly estimate?:
    | { readonly kind: 'capped'; readonly statement: Sql; readonly cap: number }
    | { readonly kind: 'explain'; readonly statement: Sql };
  readonly includes: readonly CompiledInclude[];
}

export function compileSearchStatements(plan: Plan, dialect: Dialect, shape: SearchShape): CompiledSearch {
  if (shape.summaryCount) return { page: [], pageLimit: 0, count: compileCount(plan, dialect), includes: [] };
  const pageLimit = shape.count > 0 ? shape.count + 1 : 0;
  // An include statement reads up to MAX_INCLUDED + 1 rows.
  const includeInline = inlineContentBytes(shape.maxPageBytes, MAX_INCLUDED + 1);
  let page: LimitedSql[] = [];
  if (pageLimit > 0) {
    const first = compileSearch(plan, dialect, {
      limit: pageLimit,
      position: shape.position,
      backwards: shape.backwards,
      inlineBytes: inlineContentBytes(shape.maxPageBytes, pageLimit),
    });
    page = [first, ...first.continuation];
  }
  let estimate: CompiledSearch['estimate'];
  if (shape.total === 'estimate') {
    const method = dialect.totalEstimate;
    if (method.kind === 'explain') {
      const matches = compileMatches(plan, dialect);
      estimate = { kind: 'explain', statement: new Sql(method.explain(matches.text), matches.params) };
    } else {
      estimate = { kind: 'capped', statement: compileCount(plan, dialect, method.cap + 1), cap: method.cap };
    }
  }
  return {
    page,
    pageLimit,
    // `_count=0` asks for the total only (docs/api.md): counted unless the client said otherwise.
    count:
      shape.total === 'accurate' || (shape.count === 0 && shape.total === undefined)
        ? compileCount(plan, dialect)
        : undefined,
    estimate,
    includes: plan.includes.map((include) => compileInclude(dialect, include, includeInline)),
  };
}
