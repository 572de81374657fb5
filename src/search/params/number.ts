// Number parameters (https://hl7.org/fhir/R4/search.html#number). Rows: idx_number(lo, hi): a number
// is the point [v, v]; a Range is [low, high] (an open side is ±MAX). The search value carries its
// implicit precision (`100` = [99.5, 100.5)), used by eq, ne and ap; the other prefixes compare exactly:
//
//   eq  lo >= v-h and hi < v+h      ne  lo < v-h or hi >= v+h
//   gt  hi > v    ge  hi >= v       lt  lo < v    le  lo <= v
//   sa  lo > v    eb  hi < v        sb  lo < v    ap  [lo, hi] meets v ± max(10% of v, h)
import type { Node } from '../expressions/evaluate.js';
import { and, or, raw, sql } from '../sql/fragment.js';
import type { Sql } from '../sql/fragment.js';
import { parseDecimal } from '../values/numbers.js';
import type { DecimalValue } from '../values/numbers.js';
import type { ExtractContext, ParamIds, ParamTypeHandler, Prefix, RowMatch } from './param-type.js';
import { assertModifier, invalid, splitPrefix } from './param-type.js';

type Json = Record<string, unknown>;

export const OPEN_LOW = -Number.MAX_VALUE;
export const OPEN_HIGH = Number.MAX_VALUE;

/** [lo, hi] of a number, Quantity (its value) or Range; undefined when there is no value. */
export function numberRange(node: Node): [number, number] | undefined {
  const value = node.value;
  if (typeof value === 'number') return [value, value];
  if (!value || typeof value !== 'object') return undefined;
  const object = value as Json;
  if (node.state.fhirType === 'Range') {
    const low = (object.low as Json | undefined)?.value;
    const high = (object.high as Json | undefined)?.value;
    if (typeof low !== 'number' && typeof high !== 'number') return undefined;
    return [typeof low === 'number' ? low : OPEN_LOW, typeof high === 'number' ? high : OPEN_HIGH];
  }
  return typeof object.value === 'number' ? [object.value, object.value] : undefined;
}

export function numberCondition(prefix: Prefix, search: DecimalValue, lo: Sql, hi: Sql): Sql {
  const v = search.value;
  const h = search.half;
  switch (prefix) {
    case 'eq':
      // `lo < v+h` follows from the others; it bounds the index range scan on lo.
      return and([sql`${lo} >= ${v - h}`, sql`${lo} < ${v + h}`, sql`${hi} < ${v + h}`]);
    case 'ne':
      return or([sql`${lo} < ${v - h}`, sql`${hi} >= ${v + h}`]);
    case 'gt':
      return sql`${hi} > ${v}`;
    case 'ge':
      return sql`${hi} >= ${v}`;
    case 'lt':
    case 'sb':
      return sql`${lo} < ${v}`;
    case 'le':
      return sql`${lo} <= ${v}`;
    case 'sa':
      return sql`${lo} > ${v}`;
    case 'eb':
      return sql`${hi} < ${v}`;
    case 'ap': {
      const d = Math.max(Math.abs(v) * 0.1, h);
      return and([sql`${lo} <= ${v + d}`, sql`${hi} >= ${v - d}`]);
    }
  }
}

export function parseNumberSearch(name: string, raw: string): { prefix: Prefix; number: DecimalValue } {
  const { prefix, value } = splitPrefix(name, raw);
  const number = parseDecimal(value);
  if (!number) throw invalid(name, `${name}: "${value}" is not a number`);
  return { prefix, number };
}

export const numberParam: ParamTypeHandler = {
  type: 'number',
  table: 'idx_number',
  modifiers: [],
  sort: { column: raw('t.lo'), tiebreak: [raw('t.hi')] },

  extract(nodes, ids: ParamIds, grp, ctx: ExtractContext): void {
    for (const node of nodes) {
      const range = numberRange(node);
      if (range) ctx.sink.add('idx_number', [ids.sp, grp, range[0], range[1]]);
    }
  },

  match(values, modifier, ctx): RowMatch {
    assertModifier(this, ctx.name, modifier);
    const conditions = values.map((value) => {
      const { prefix, number } = parseNumberSearch(ctx.name, value);
      return numberCondition(prefix, number, raw('t.lo'), raw('t.hi'));
    });
    return { condition: or(conditions), rangeValues: values.length, selectivity: 5 };
  },
};
