// Which resources of a type an export selects, as a condition over the resource row `r0` (snapshot.ts
// walks the type with it):
//   - the level: everything (system); Patients and the Patient compartment (https://hl7.org/fhir/R4/compartmentdefinition-patient.html)
//     of any patient (Patient); the Group's member Patients and their compartments (Group). Compartment
//     membership is a probe of the resource's own reference index rows (idx_reference (pk, sp)) for the
//     compartment's parameters, so a page costs one index lookup per row, whatever the database's size;
//     a Group's members are its `member` index rows, read once per statement.
//   - `_typeFilter`: each query is planned by the search engine (parse → plan → cost check, with the
//     caller's scopes) and its criteria become the same probes a search uses; several filters on one
//     type are ORed (https://hl7.org/fhir/uv/bulkdata/STU2/export.html#_typefilter-query-parameter).
import type { Dialect } from '../storage/sql/dialect.js';
import { spId } from '../search/catalog.js';
import type { SearchCatalog } from '../search/catalog.js';
import { checkCost } from '../search/cost-limits.js';
import { AppError } from '../errors.js';
import { parseSearch } from '../search/parse.js';
import { planSearch } from '../search/plan.js';
import type { PlannedCriterion } from '../search/plan.js';
import { criterionCondition } from '../search/sql/compile.js';
import { and, list, or, raw, sql } from '../search/sql/fragment.js';
import type { Sql } from '../search/sql/fragment.js';
import type { TypeFilter } from './kickoff.js';

export type ExportLevel = 'system' | 'patient' | 'group';

/** What a job exports, fixed at kick-off and stored with the job. */
export interface ExportSpec {
  readonly level: ExportLevel;
  /** The Group's pk (Group level). */
  readonly groupPk?: number;
  /**
   * How many Patients the Group named as members at kick-off (its `member` index rows, one per distinct
   * Patient): a small Group's resources are found from its members (GROUP_DRIVE_LIMIT), a large one's
   * by walking each type. Jobs stored without it walk.
   */
  readonly groupMembers?: number;
  /** The types to walk, in order, each readable by the account at kick-off. */
  readonly types: readonly string[];
  readonly since?: number;
  /** The filters of the exported types (validated at kick-off). */
  readonly typeFilters: readonly TypeFilter[];
  /**
   * The kick-off token's scopes: within the account's scopes when the job runs, they decide which
   * Binaries' securityContext the job may read (runner.ts). Jobs stored without them use the account's.
   */
  readonly scopes?: readonly string[];
}

/** The compartment parameters' ids of `type` that the catalog indexes as references. */
export function compartmentSps(
  catalog: SearchCatalog,
  type: string,
  compartment: ReadonlyMap<string, readonly string[]>,
): number[] {
  return (compartment.get(type) ?? []).flatMap((code) => {
    const param = catalog.param(type, code);
    return param && param.kind === 'index' && param.type === 'reference' ? [param.sp] : [];
  });
}

/**
 * A Group of at most this many members is exported from its members: each type's page reads the
 * members' compartment rows from the reference index (sp, target_id) instead of walking the whole type
 * and probing every resource, which costs the size of the database for a cohort of ten. Each page reads
 * all of a type's member resources again (and sorts them), so a large Group walks instead.
 */
export const GROUP_DRIVE_LIMIT = 1000;

/**
 * The Patient ids a Group names as members (its `member` index rows), read through (pk, sp): the sp term
 * is written so that no planner reads every Group's members by (sp, ...) instead (Dialect.probeColumn).
 */
function groupMembers(dialect: Dialect, groupPk: number): Sql {
  return sql`SELECT g.target_id FROM idx_reference g WHERE g.pk = ${groupPk} AND ${raw(dialect.probeColumn('g.sp'))} = ${spId('Group', 'member')} AND g.target_type = ${'Patient'}`;
}

/** How many members Group `groupPk` has: its `member` index rows (ExportSpec.groupMembers). */
export function groupMemberCount(dialect: Dialect, groupPk: number): Sql {
  return sql`SELECT COUNT(*) AS n FROM (${groupMembers(dialect, groupPk)}) m`;
}

/** The level's condition on `type`, or undefined when it selects every resource of the type. */
export function levelCondition(
  dialect: Dialect,
  spec: ExportSpec,
  type: string,
  sps: readonly number[],
): Sql | undefined {
  if (spec.level === 'system') return undefined;
  const members = spec.level === 'group' ? groupMembers(dialect, spec.groupPk ?? -1) : undefined;
  if (type === 'Patient') return members ? sql`r0.id IN (${members})` : undefined;
  if (sps.length === 0) return sql`1=0`;
  if (members && spec.groupMembers !== undefined && spec.groupMembers <= GROUP_DRIVE_LIMIT) {
    return sql`r0.pk IN (SELECT t.pk FROM idx_reference t WHERE t.sp IN ${list(sps)} AND t.target_type = ${'Patient'} AND t.target_id IN (${members}))`;
  }
  const target = members ? sql` AND t.target_id IN (${members})` : sql``;
  return sql`EXISTS (SELECT 1 FROM idx_reference t WHERE t.pk = r0.pk AND ${raw(dialect.probeColumn('t.sp'))} IN ${list(sps)} AND t.target_type = ${'Patient'}${target}${raw(dialect.probeSuffix)})`;
}

/**
 * The criteria of one `_typeFilter`, planned like a search on its type: 400 for what a search refuses,
 * 403 for a chain through a type the caller may not search, 422 beyond the cost limits. Result
 * parameters (`_sort`, `_count`, `_include`, ...) have no meaning in an export: 400.
 */
export function planTypeFilter(
  dialect: Dialect,
  catalog: SearchCatalog,
  filter: TypeFilter,
  now: number,
  canSearch: (type: string) => boolean,
): readonly PlannedCriterion[] {
  const parsed = parseSearch([...new URLSearchParams(filter.query)]);
  if (parsed.resultParams.length > 0 || parsed.cursor !== undefined) {
    const names = parsed.resultParams.map(([name]) => name).join(', ') || '_cursor';
    throw new AppError('bad-request', `_typeFilter=${filter.type}?${filter.query}: ${names} cannot filter an export`, {
      expression: '_typeFilter',
    });
  }
  const plan = planSearch(parsed, [filter.type], {
    catalog,
    references: catalog.references,
    now,
    strict: true,
    canSearch,
    dialect,
  });
  checkCost(parsed, plan);
  return plan.criteria;
}

/** The filters of `type` as one condition (ORed), or undefined when it has none. */
export function filterCondition(
  dialect: Dialect,
  plannedFilters: readonly (readonly PlannedCriterion[])[],
): Sql | undefined {
  if (plannedFilters.length === 0) return undefined;
  return or(plannedFilters.map((criteria) => and(criteria.map((c) => criterionCondition(dialect, c, 'r0', 0)))));
}

/** The whole selection of `type` for a job: level and filters, or undefined for every resource. */
export function selectionFor(
  dialect: Dialect,
  catalog: SearchCatalog,
  compartment: ReadonlyMap<string, readonly string[]>,
  spec: ExportSpec,
  type: string,
  now: number,
): Sql | undefined {
  const level = levelCondition(dialect, spec, type, compartmentSps(catalog, type, compartment));
  const filters = filterCondition(
    dialect,
    spec.typeFilters.filter((f) => f.type === type).map((f) => planTypeFilter(dialect, catalog, f, now, () => true)),
  );
  const parts = [level, filters].filter((p): p is Sql => p !== undefined);
  return parts.length === 0 ? undefined : and(parts);
}
