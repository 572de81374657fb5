// String parameters (https://hl7.org/fhir/R4/search.html#string). Rows: idx_string(norm, exact), one
// per string value; a HumanName or Address gives one row per part and one for its whole text, so
// `name=john sm` and `name=smi` both match "John Smith". Matching is on `norm` (accents and case
// removed): default = starts with (an index range), `:exact` = `exact` equal, `:contains` = substring,
// and the specification's `:not` = no value equals the text (ignoring case and accents; no value at all matches).
import type { Node } from '../expressions/evaluate.js';
import { or, raw, sql } from '../sql/fragment.js';
import type { Sql } from '../sql/fragment.js';
import { keyIn, keyStartsWith, keyTiebreak, wholeValue } from '../sql/keyed.js';
import { unescapeValue } from '../values/escapes.js';
import { escapeLike, normalizeText } from '../values/text.js';
import type { ExtractContext, ParamIds, ParamTypeHandler, RowMatch } from './param-type.js';
import { assertModifier, invalid } from './param-type.js';

const NAME_PARTS = ['family', 'given', 'prefix', 'suffix'] as const;
const ADDRESS_PARTS = ['line', 'city', 'district', 'state', 'postalCode', 'country'] as const;

function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

/** The string values a node contributes: the parts of names and addresses and their whole text. */
export function stringValues(node: Node): string[] {
  const value = node.value;
  if (typeof value === 'string') return [value];
  if (typeof value === 'number' || typeof value === 'boolean') return [];
  if (!value || typeof value !== 'object') return [];
  const object = value as Record<string, unknown>;
  const type = node.state.fhirType;
  if (type === 'HumanName' || type === 'Address') {
    const parts = (type === 'HumanName' ? NAME_PARTS : ADDRESS_PARTS).flatMap((p) => strings(object[p]));
    // The whole name/address as written (text) and as assembled from its parts ("John Smith").
    const assembled =
      type === 'HumanName' ? [...strings(object.given), ...strings(object.family)].join(' ') : parts.join(' ');
    return [...parts, assembled, ...strings(object.text)];
  }
  if (type === 'CodeableConcept') {
    const codings = Array.isArray(object.coding) ? (object.coding as Record<string, unknown>[]) : [];
    return [...strings(object.text), ...codings.flatMap((c) => strings(c?.display))];
  }
  if (type === 'Coding') return strings(object.display);
  // Any other complex value: its own string elements (Annotation.text, Attachment.title...).
  return Object.entries(object)
    .filter(([k, v]) => typeof v === 'string' && k !== 'id' && k !== 'url' && k !== 'system')
    .map(([, v]) => v as string);
}

export const stringParam: ParamTypeHandler = {
  type: 'string',
  table: 'idx_string',
  modifiers: ['exact', 'contains', 'not'],
  sort: { column: raw('t.norm'), tiebreak: [keyTiebreak('norm'), raw('t.exact')] },

  extract(nodes: readonly Node[], ids: ParamIds, grp: number, ctx: ExtractContext): void {
    for (const node of nodes) {
      for (const text of stringValues(node)) {
        const norm = normalizeText(text);
        if (norm === '') continue;
        ctx.sink.add('idx_string', [ids.sp, grp, norm, text]);
      }
    }
  },

  match(values, modifier, ctx): RowMatch {
    assertModifier(this, ctx.name, modifier);
    const conditions: Sql[] = [];
    const equal: [string, string][] = [];
    let selectivity = 2;
    for (const raw of values) {
      const text = unescapeValue(raw);
      const norm = normalizeText(text);
      if (norm === '') throw invalid(ctx.name, `${ctx.name}: empty value`);
      if (modifier === 'exact') equal.push([norm, text]);
      else if (modifier === 'not') equal.push([norm, text]);
      else if (modifier === 'contains') {
        conditions.push(sql`${wholeValue('norm')} LIKE ${`%${escapeLike(norm)}%`} ESCAPE '\\'`);
        selectivity = Math.max(selectivity, 5);
      } else {
        conditions.push(keyStartsWith('norm', norm));
        // One letter is broad in any data (never worth counting); from two the index count decides
        // (estimate.ts): `name=Mu` drives from ~100 rows (60 µs) where walking the Patients took 470 µs.
        if (norm.length < 2) selectivity = Math.max(selectivity, 4);
      }
    }
    // Equalities: one value list whatever their number (sql/keyed.ts keyIn).
    if (modifier === 'exact') conditions.push(keyIn(ctx.dialect, ['norm', 'exact'], equal, ['exact']));
    else if (modifier === 'not') {
      conditions.push(
        keyIn(
          ctx.dialect,
          ['norm'],
          equal.map(([norm]) => [norm]),
        ),
      );
    }
    return {
      condition: or(conditions),
      negated: modifier === 'not',
      rangeValues: modifier === 'exact' || modifier === 'not' ? undefined : values.length,
      selectivity: modifier === 'not' ? 9 : selectivity,
    };
  },
};
