// Date parameters (https://hl7.org/fhir/R4/search.html#date). Rows: idx_date(lo, hi), the half-open
// range [lo, hi) in ms UTC of every date, dateTime, instant, Period (open ends = far past/future) and
// Timing (its events and bounds). A search value is a range too (its precision: `2020-03` is the whole
// month), and each prefix compares the two ranges, target [lo, hi) against search [s, e):
//
//   eq  lo >= s and hi <= e        (the search range contains the target)
//   ne  lo < s or hi > e           (it does not)
//   gt  hi > e                     (the target extends after the search range)
//   lt  lo < s                     (the target extends before it)
//   ge  gt or eq                   le  lt or eq
//   sa  lo >= e (starts after)     eb  hi <= s (ends before)
//   sb  lo < s (the specification: the target starts before the search range starts)
//   ap  the ranges overlap once the search range is widened by 10% of its distance from now
import type { Node } from '../expressions/evaluate.js';
import { and, or, raw, sql } from '../sql/fragment.js';
import type { Sql } from '../sql/fragment.js';
import { parseDateRange, periodRange } from '../values/dates.js';
import type { TimeRange } from '../values/dates.js';
import type { ExtractContext, ParamIds, ParamTypeHandler, Prefix, RowMatch } from './param-type.js';
import { assertModifier, invalid, splitPrefix } from './param-type.js';

type Json = Record<string, unknown>;

/** The time ranges a node stands for. */
export function dateRanges(node: Node): TimeRange[] {
  const value = node.value;
  if (typeof value === 'string') {
    const range = parseDateRange(value);
    return range ? [range] : [];
  }
  if (!value || typeof value !== 'object') return [];
  const object = value as Json;
  switch (node.state.fhirType) {
    case 'Period': {
      const range = periodRange(object);
      return range ? [range] : [];
    }
    case 'Timing': {
      const out: TimeRange[] = [];
      for (const event of Array.isArray(object.event) ? object.event : []) {
        const range = typeof event === 'string' ? parseDateRange(event) : undefined;
        if (range) out.push(range);
      }
      const bounds = (object.repeat as Json | undefined)?.boundsPeriod as Json | undefined;
      const range = bounds ? periodRange(bounds) : undefined;
      if (range) out.push(range);
      return out;
    }
    default:
      return [];
  }
}

/** The condition for one prefix, over any pair of lo/hi expressions (index rows or resource columns). */
export function rangeCondition(prefix: Prefix, search: TimeRange, lo: Sql, hi: Sql, now: number): Sql {
  const s = search.lo;
  const e = search.hi;
  // `lo < e` follows from the other two (lo < hi); it bounds the index range scan on lo.
  const eq = and([sql`${lo} >= ${s}`, sql`${lo} < ${e}`, sql`${hi} <= ${e}`]);
  switch (prefix) {
    case 'eq':
      return eq;
    case 'ne':
      return or([sql`${lo} < ${s}`, sql`${hi} > ${e}`]);
    case 'gt':
      return sql`${hi} > ${e}`;
    case 'lt':
    case 'sb':
      return sql`${lo} < ${s}`;
    case 'ge':
      return or([sql`${hi} > ${e}`, eq]);
    case 'le':
      return or([sql`${lo} < ${s}`, eq]);
    case 'sa':
      return sql`${lo} >= ${e}`;
    case 'eb':
      return sql`${hi} <= ${s}`;
    case 'ap': {
      const delta = Math.round(Math.max(Math.abs(now - s), Math.abs(now - e)) * 0.1);
      return and([sql`${lo} < ${e + delta}`, sql`${hi} > ${s - delta}`]);
    }
  }
}

/** Parses one date search value (with its prefix); a space stands for the `+` of an unencoded zone. */
export function parseDateSearch(name: string, raw: string): { prefix: Prefix; range: TimeRange } {
  const { prefix, value } = splitPrefix(name, raw);
  const text = value.replace(/ ([0-9]{2}:?[0-9]{2})$/, '+$1');
  const range = parseDateRange(text);
  if (!range || !/^[0-9]{4}/.test(text)) {
    throw invalid(name, `${name}: "${value}" is not a valid date, dateTime or instant`);
  }
  return { prefix, range };
}

export const dateParam: ParamTypeHandler = {
  type: 'date',
  table: 'idx_date',
  modifiers: [],
  sort: { column: raw('t.lo'), tiebreak: [raw('t.hi')] },

  extract(nodes, ids: ParamIds, grp, ctx: ExtractContext): void {
    for (const node of nodes) {
      for (const range of dateRanges(node)) ctx.sink.add('idx_date', [ids.sp, grp, range.lo, range.hi]);
    }
  },

  match(values, modifier, ctx): RowMatch {
    assertModifier(this, ctx.name, modifier);
    let selectivity = 0;
    const conditions = values.map((value) => {
      const { prefix, range } = parseDateSearch(ctx.name, value);
      // A day or less with eq is a narrow range; anything open-ended is not.
      selectivity = Math.max(selectivity, prefix === 'eq' && range.hi - range.lo <= 86_400_000 ? 2 : 5);
      return rangeCondition(prefix, range, raw('t.lo'), raw('t.hi'), ctx.now);
    });
    return { condition: or(conditions), rangeValues: values.length, selectivity };
  },
};
