// What every search-parameter type implements (the style notes principle 6, after Blaze): extraction of index
// rows at write time and the SQL row condition at search time live side by side in one module per type
// (string.ts, token.ts, date.ts, number.ts, quantity.ts, reference.ts, uri.ts; position.ts for Location
// `near`), so they cannot drift.
import type { SearchParameterType } from '../../definitions/registry.js';
import { AppError } from '../../errors.js';
import type { Node } from '../expressions/evaluate.js';
import type { TypeModel, TypeState } from '../expressions/model.js';
import type { Sql } from '../sql/fragment.js';
import type { IndexTable, RowSink } from '../tables.js';
import type { GeoPoint } from '../values/geo.js';
import type { ReferenceParser } from '../../fhir/references.js';
import type { Dialect } from '../../storage/sql/dialect.js';

export interface ExtractContext {
  readonly sink: RowSink;
  readonly references: ReferenceParser;
  /** The resource being indexed (for contained references). */
  readonly resource: Record<string, unknown>;
  /** The evaluator's state for a value of a FHIR type (Reference.identifier is an Identifier). */
  stateOf(fhirType: string): TypeState;
  /** The type model (code systems of bound codes). */
  readonly model: TypeModel;
}

/** The ids one parameter writes under: its own and those of its derived rows. */
export interface ParamIds {
  readonly sp: number;
  /** Token rows of `Identifier.type` for `:of-type` (token) or `Reference.identifier` for `:identifier`. */
  readonly extraSp: number;
}

export interface MatchContext {
  readonly references: ReferenceParser;
  /** Now, in ms (for `ap` on dates). */
  readonly now: number;
  /** The reference parameter's declared targets, for a bare id. */
  readonly targets: readonly string[];
  /** The parameter as written in the query (for error messages). */
  readonly name: string;
  /** Writes value lists (fragment.ts equalsAny). */
  readonly dialect: Dialect;
}

/** One parameter's values (an OR list) compiled to a condition on its index rows. */
export interface RowMatch {
  /** The condition on the index table aliased `t` (sp is added by the compiler). */
  readonly condition: Sql;
  /** The resource matches when no row satisfies the condition (`:not`, string `:not`). */
  readonly negated?: boolean;
  /** Rows of the extra sp (`:of-type`, `:identifier`) instead of the parameter's own. */
  readonly useExtraSp?: boolean;
  /** The table the condition applies to, when not the handler's own (`:identifier` reads idx_token). */
  readonly table?: IndexTable;
  /**
   * Values matched as a range or a pattern (prefixes, `:text`, `:contains`, dates, numbers, quantities,
   * `:below`): each is one more comparison on every row the criterion probes, where an equality list is
   * one index lookup. Counted against SEARCH_LIMITS.rangeValuesPerSearch (cost-limits.ts).
   */
  readonly rangeValues?: number;
  /** Lower is more selective: used to pick the index that drives the query (see plan.ts). */
  readonly selectivity: number;
  /** Location `near`: the points the matches' distances are measured from (execute.ts). */
  readonly origins?: readonly GeoPoint[];
}

export interface ParamTypeHandler {
  readonly type: SearchParameterType;
  readonly table: IndexTable;
  /** The modifiers this type accepts besides `missing` (which the compiler handles for every type). */
  readonly modifiers: readonly string[];
  /** Writes the index rows for the nodes a parameter's expression produced. */
  extract(nodes: readonly Node[], ids: ParamIds, grp: number, ctx: ExtractContext): void;
  /** Parses the OR-list of one parameter occurrence and builds its row condition; throws AppError 400. */
  match(values: readonly string[], modifier: string | undefined, ctx: MatchContext): RowMatch;
  /**
   * How resources sort on this type (over alias `t`): ascending by the MIN of `column` over the
   * resource's rows, descending by its MAX. `tiebreak` completes `column` to a key unique among one
   * resource's rows (so the index-ordered sort in sql/compile.ts can pick exactly one row per resource);
   * `filter` leaves rows out of sorting. Absent where the type has no order (`near`): `_sort` is a 400.
   */
  readonly sort?: { readonly column: Sql; readonly tiebreak: readonly Sql[]; readonly filter?: Sql };
}

export function invalid(name: string, message: string): AppError {
  return new AppError('invalid-search', message, { expression: name });
}

export const PREFIXES = ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap', 'sb'] as const;
export type Prefix = (typeof PREFIXES)[number];

/** Splits `ge2020` into prefix and value (https://hl7.org/fhir/R4/search.html#prefix). */
export function splitPrefix(name: string, raw: string): { prefix: Prefix; value: string } {
  const m = /^([a-z]{2})(.*)$/.exec(raw);
  if (m && (PREFIXES as readonly string[]).includes(m[1])) return { prefix: m[1] as Prefix, value: m[2] };
  if (/^[a-z]/.test(raw)) {
    throw invalid(
      name,
      `${name}: "${raw}" does not start with a known prefix (${PREFIXES.join(', ')}) or a number/date`,
    );
  }
  return { prefix: 'eq', value: raw };
}

/** Modifier check shared by the types: unknown → 400. */
export function assertModifier(handler: ParamTypeHandler, name: string, modifier: string | undefined): void {
  if (modifier !== undefined && !handler.modifiers.includes(modifier)) {
    throw invalid(
      name,
      `The modifier :${modifier} does not apply to ${handler.type} parameter ${name.split(':')[0]}` +
        (handler.modifiers.length
          ? ` (allowed: ${['missing', ...handler.modifiers].map((m) => ':' + m).join(' ')})`
          : ''),
    );
  }
}
