// Quantity parameters (https://hl7.org/fhir/R4/search.html#quantity). Rows: idx_quantity(system, code,
// lo, hi), the value as written (code, or unit when there is no code; a second row for the unit when it
// differs), and for UCUM quantities one more row in base units (system CANONICAL_SYSTEM, code e.g.
// `s` or `g.m-3`), so `length=gt2|http://unitsofmeasure.org|d` compares 2 days with 4320 min in
// seconds. `value` alone compares the value in any unit; `value||code` the code or unit in any system;
// `value|system|code` the exact unit, or, when it is valid UCUM, the canonical rows. Prefixes as number.ts.
import type { Node } from '../expressions/evaluate.js';
import { and, or, raw, sql } from '../sql/fragment.js';
import { keyEquals, keyTiebreak } from '../sql/keyed.js';
import { CANONICAL_SYSTEM } from '../tables.js';
import { splitUnescaped, unescapeValue } from '../values/escapes.js';
import { canonicalUnit, toCanonicalValue, UCUM_SYSTEM } from '../values/ucum.js';
import type { ExtractContext, ParamIds, ParamTypeHandler, RowMatch } from './param-type.js';
import { assertModifier, invalid } from './param-type.js';
import { numberCondition, numberRange, parseNumberSearch } from './number.js';

type Json = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function unitOf(object: Json | undefined): { system: string; code?: string; unit?: string } {
  if (!object) return { system: '' };
  if (typeof object.currency === 'string') return { system: 'urn:iso:std:iso:4217', code: object.currency };
  return { system: str(object.system) ?? '', code: str(object.code), unit: str(object.unit) };
}

export const quantityParam: ParamTypeHandler = {
  type: 'quantity',
  table: 'idx_quantity',
  modifiers: [],
  // Sorted on the values as written (the canonical rows would mix units with them).
  sort: {
    column: raw('t.lo'),
    tiebreak: [raw('t.hi'), raw('t.system'), keyTiebreak('system'), raw('t.code'), keyTiebreak('code')],
    filter: sql`t.system <> ${CANONICAL_SYSTEM}`,
  },

  extract(nodes: readonly Node[], ids: ParamIds, grp, ctx: ExtractContext): void {
    for (const node of nodes) {
      if (node.state.fhirType === 'SampledData') continue;
      const range = numberRange(node);
      if (!range) continue;
      const object = node.value && typeof node.value === 'object' ? (node.value as Json) : undefined;
      const unit =
        node.state.fhirType === 'Range'
          ? unitOf(((object?.low ?? object?.high) as Json | undefined) ?? undefined)
          : unitOf(object);
      const [lo, hi] = range;
      ctx.sink.add('idx_quantity', [ids.sp, grp, unit.system, unit.code ?? unit.unit ?? '', lo, hi]);
      if (unit.unit && unit.code && unit.unit !== unit.code) {
        ctx.sink.add('idx_quantity', [ids.sp, grp, unit.system, unit.unit, lo, hi]);
      }
      if (unit.system === UCUM_SYSTEM && unit.code) {
        const canonical = canonicalUnit(unit.code);
        if (canonical) {
          const clo = lo === -Number.MAX_VALUE ? lo : toCanonicalValue(lo, canonical);
          const chi = hi === Number.MAX_VALUE ? hi : toCanonicalValue(hi, canonical);
          ctx.sink.add('idx_quantity', [ids.sp, grp, CANONICAL_SYSTEM, canonical.code, clo, chi]);
        }
      }
    }
  },

  match(values, modifier, ctx): RowMatch {
    assertModifier(this, ctx.name, modifier);
    // A value in a unit, equal or approximately: narrow. Ranges and values in any unit: broad.
    let selectivity = 0;
    const conditions = values.map((value) => {
      const parts = splitUnescaped(value, '|').map(unescapeValue);
      if (parts.length !== 1 && parts.length !== 3) {
        throw invalid(
          ctx.name,
          `${ctx.name}: a quantity is number, number|system|code or number||code, got "${value}"`,
        );
      }
      const { prefix, number } = parseNumberSearch(ctx.name, parts[0]);
      const [, system = '', code = ''] = parts;
      selectivity = Math.max(selectivity, prefix === 'eq' || prefix === 'ap' ? 2 : 4);
      if (code === '') {
        selectivity = 5;
        return and([sql`t.system <> ${CANONICAL_SYSTEM}`, numberCondition(prefix, number, raw('t.lo'), raw('t.hi'))]);
      }
      if (system === UCUM_SYSTEM) {
        const canonical = canonicalUnit(code);
        if (canonical) {
          const scaled = {
            value: toCanonicalValue(number.value, canonical),
            half: number.half * Math.abs(canonical.factor),
          };
          return and([
            sql`t.system = ${CANONICAL_SYSTEM}`,
            keyEquals('code', canonical.code),
            numberCondition(prefix, scaled, raw('t.lo'), raw('t.hi')),
          ]);
        }
      }
      const unitCondition =
        system === ''
          ? and([keyEquals('code', code), sql`t.system <> ${CANONICAL_SYSTEM}`])
          : and([keyEquals('system', system), keyEquals('code', code)]);
      return and([unitCondition, numberCondition(prefix, number, raw('t.lo'), raw('t.hi'))]);
    });
    return { condition: or(conditions), rangeValues: values.length, selectivity };
  },
};
