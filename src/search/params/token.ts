// Token parameters (https://hl7.org/fhir/R4/search.html#token). Rows: idx_token(system, code, text):
// a Coding gives (system, code, display), a CodeableConcept each coding plus a row for its text, an
// Identifier (system, value, type.text), a ContactPoint (system, value), a boolean or code (“”, value).
// `text` holds the normalised display/text for `:text`. Identifier types go to a second parameter id
// (ParamIds.extraSp) as (`typeSystem|typeCode`, value) for `:of-type`. Absent systems are stored as ''
// so `|code` ("no system") is an equality too.
import type { Node } from '../expressions/evaluate.js';
import type { TypeModel } from '../expressions/model.js';
import type { Dialect } from '../../storage/sql/dialect.js';
import { and, or, raw, sql } from '../sql/fragment.js';
import type { Sql } from '../sql/fragment.js';
import { keyIn, keyTiebreak } from '../sql/keyed.js';
import type { RowSink } from '../tables.js';
import { splitUnescaped, unescapeValue } from '../values/escapes.js';
import { escapeLike, normalizeText, prefixUpperBound } from '../values/text.js';
import type { ExtractContext, ParamIds, ParamTypeHandler, RowMatch } from './param-type.js';
import { assertModifier, invalid } from './param-type.js';

type Json = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const norm = (v: unknown): string | null => {
  const s = str(v);
  return s === undefined ? null : normalizeText(s) || null;
};

function addCoding(sink: RowSink, sp: number, grp: number, coding: Json | undefined): void {
  if (!coding || typeof coding !== 'object') return;
  const code = str(coding.code);
  const display = norm(coding.display);
  if (code === undefined && display === null) return;
  sink.add('idx_token', [sp, grp, str(coding.system) ?? '', code ?? '', display]);
}

/** Writes the token rows of one value (also used for `Reference.identifier`). */
export function addTokenRows(node: Node, ids: ParamIds, grp: number, sink: RowSink, model?: TypeModel): void {
  const value = node.value;
  const sp = ids.sp;
  if (typeof value === 'boolean') {
    sink.add('idx_token', [sp, grp, '', String(value), null]);
    return;
  }
  if (typeof value === 'string' || typeof value === 'number') {
    if (value === '') return;
    // A code bound to a value set (gender, status...) is stored with its code system, as if it were a
    // Coding, so both `gender=male` and `gender=http://hl7.org/fhir/administrative-gender|male` match.
    const binding = node.state.binding;
    const system = binding && typeof value === 'string' ? (model?.codeSystem(binding, value) ?? '') : '';
    sink.add('idx_token', [sp, grp, system, String(value), null]);
    return;
  }
  if (!value || typeof value !== 'object') return;
  const object = value as Json;
  switch (node.state.fhirType) {
    case 'Coding':
      addCoding(sink, sp, grp, object);
      return;
    case 'CodeableConcept': {
      const codings = Array.isArray(object.coding) ? (object.coding as Json[]) : [];
      for (const coding of codings) addCoding(sink, sp, grp, coding);
      const text = norm(object.text);
      if (text !== null) sink.add('idx_token', [sp, grp, '', '', text]);
      return;
    }
    case 'Identifier': {
      const identifierValue = str(object.value);
      const type = object.type as Json | undefined;
      const typeText = norm(type?.text);
      if (identifierValue !== undefined || typeText !== null) {
        sink.add('idx_token', [sp, grp, str(object.system) ?? '', identifierValue ?? '', typeText]);
      }
      if (identifierValue !== undefined && type && Array.isArray(type.coding)) {
        for (const coding of type.coding as Json[]) {
          const code = str(coding?.code);
          if (code !== undefined) {
            sink.add('idx_token', [ids.extraSp, grp, `${str(coding.system) ?? ''}|${code}`, identifierValue, null]);
          }
        }
      }
      return;
    }
    case 'ContactPoint': {
      const contactValue = str(object.value);
      if (contactValue !== undefined) sink.add('idx_token', [sp, grp, str(object.system) ?? '', contactValue, null]);
      return;
    }
    case 'Quantity':
    case 'Age':
    case 'Duration':
    case 'Count':
    case 'Distance':
    case 'SimpleQuantity': {
      const code = str(object.code) ?? str(object.unit);
      if (code !== undefined) sink.add('idx_token', [sp, grp, str(object.system) ?? '', code, null]);
      return;
    }
    case 'Reference': {
      const reference = str(object.reference);
      if (reference !== undefined) sink.add('idx_token', [sp, grp, '', reference, norm(object.display)]);
      return;
    }
    default:
      return;
  }
}

/**
 * Token equalities over alias `t`: bare `codes`, (code, system) `pairs` and `systems` (`system|`: any code
 * of the system), each group one value list whatever its length (sql/keyed.ts keyIn).
 */
export function tokenEquals(
  d: Dialect,
  codes: readonly string[],
  pairs: readonly (readonly [string, string])[],
  systems: readonly string[],
): Sql {
  const conditions: Sql[] = [];
  if (codes.length > 0)
    conditions.push(
      keyIn(
        d,
        ['code'],
        codes.map((code) => [code]),
      ),
    );
  if (pairs.length > 0) conditions.push(keyIn(d, ['code', 'system'], pairs));
  if (systems.length > 0) {
    conditions.push(
      and([
        keyIn(
          d,
          ['system'],
          systems.map((system) => [system]),
        ),
        sql`t.code <> ''`,
      ]),
    );
  }
  return or(conditions);
}

const UNSUPPORTED = new Set(['above', 'below', 'in', 'not-in']);

/** Heuristic: short lower-case words (status, gender, true) are small value sets, so poor index drivers. */
function codeSelectivity(code: string): number {
  return /^[a-z-]{1,16}$/.test(code) ? 4 : 1;
}

export const tokenParam: ParamTypeHandler = {
  type: 'token',
  table: 'idx_token',
  modifiers: ['not', 'text', 'of-type', 'above', 'below', 'in', 'not-in'],
  sort: {
    column: raw('t.code'),
    tiebreak: [keyTiebreak('code'), raw('t.system'), keyTiebreak('system'), raw("COALESCE(t.text, '')")],
  },

  extract(nodes, ids, grp, ctx: ExtractContext): void {
    for (const node of nodes) addTokenRows(node, ids, grp, ctx.sink, ctx.model);
  },

  match(values, modifier, ctx): RowMatch {
    assertModifier(this, ctx.name, modifier);
    if (modifier !== undefined && UNSUPPORTED.has(modifier)) {
      throw invalid(
        ctx.name,
        `${ctx.name}: the :${modifier} modifier needs terminology services, which this server does not provide`,
      );
    }
    if (modifier === 'text') {
      const conditions = values.map((raw) => {
        const text = normalizeText(unescapeValue(raw));
        if (text === '') throw invalid(ctx.name, `${ctx.name}: empty value`);
        const upper = prefixUpperBound(text);
        return upper === undefined
          ? sql`t.text LIKE ${`${escapeLike(text)}%`} ESCAPE '\\'`
          : and([sql`t.text >= ${text}`, sql`t.text < ${upper}`]);
      });
      return { condition: or(conditions), rangeValues: values.length, selectivity: 5 };
    }
    if (modifier === 'of-type') {
      const pairs = values.map((raw): [string, string] => {
        const parts = splitUnescaped(raw, '|').map(unescapeValue);
        if (parts.length !== 3 || parts[1] === '' || parts[2] === '') {
          throw invalid(ctx.name, `${ctx.name}: :of-type takes system|code|value, got "${raw}"`);
        }
        // Rows of the extra sp: (`typeSystem|typeCode`, identifier value) as (system, code).
        return [parts[2], `${parts[0]}|${parts[1]}`];
      });
      return { condition: tokenEquals(ctx.dialect, [], pairs, []), useExtraSp: true, selectivity: 1 };
    }
    const codes: string[] = [];
    const pairs: [string, string][] = [];
    const systems: string[] = [];
    let selectivity = 0;
    for (const raw of values) {
      const parts = splitUnescaped(raw, '|').map(unescapeValue);
      if (parts.length > 2)
        throw invalid(ctx.name, `${ctx.name}: a token is code, system|code, |code or system|, got "${raw}"`);
      if (parts.length === 1) {
        if (parts[0] === '') throw invalid(ctx.name, `${ctx.name}: empty value`);
        codes.push(parts[0]);
        selectivity = Math.max(selectivity, codeSelectivity(parts[0]));
        continue;
      }
      const [system, code] = parts;
      if (system === '' && code === '') throw invalid(ctx.name, `${ctx.name}: empty value`);
      if (code === '') {
        systems.push(system);
        selectivity = Math.max(selectivity, 5);
      } else {
        pairs.push([code, system]);
        selectivity = Math.max(selectivity, codeSelectivity(code));
      }
    }
    // Identifiers are (nearly) unique whatever they look like.
    if (/(^|[.:-])identifier(:|$)/.test(ctx.name)) selectivity = Math.min(selectivity, 1);
    return {
      condition: tokenEquals(ctx.dialect, codes, pairs, systems),
      negated: modifier === 'not',
      selectivity: modifier === 'not' ? 9 : selectivity,
    };
  },
};
