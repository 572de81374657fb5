// Reference parameters (https://hl7.org/fhir/R4/search.html#reference). Rows: idx_reference(target_type,
// target_id): a local reference (`Patient/1`, `Patient/1/_history/2`, or an absolute URL on our own
// base) is split; any other (another server's URL, a canonical, an unresolved conditional reference)
// is kept whole in target_id with target_type ''. Only the targets the expression allows are indexed
// (`Encounter.subject.where(resolve() is Patient)` gives `patient` Patient references only).
// `Reference.identifier` goes to idx_token under the parameter's extra id, for `:identifier`.
// Chains and `_has` join these rows to the resource table on (type, id): see sql/compile.ts.
import type { Node } from '../expressions/evaluate.js';
import { and, or, raw, sql } from '../sql/fragment.js';
import type { Sql } from '../sql/fragment.js';
import { keyIn, keyTiebreak } from '../sql/keyed.js';
import { splitUnescaped, unescapeValue } from '../values/escapes.js';
import type { ExtractContext, MatchContext, ParamIds, ParamTypeHandler, RowMatch } from './param-type.js';
import { invalid } from './param-type.js';
import { addTokenRows, tokenEquals } from './token.js';

type Json = Record<string, unknown>;

export const referenceParam: ParamTypeHandler & {
  matchIdentifier(values: readonly string[], ctx: MatchContext): RowMatch;
} = {
  type: 'reference',
  table: 'idx_reference',
  modifiers: ['identifier', 'above', 'below'],
  sort: { column: raw('t.target_id'), tiebreak: [keyTiebreak('target_id'), raw('t.target_type')] },

  extract(nodes: readonly Node[], ids: ParamIds, grp, ctx: ExtractContext): void {
    for (const node of nodes) {
      const value = node.value;
      if (typeof value === 'string') {
        // canonical / uri elements searched as references
        if (value !== '') ctx.sink.add('idx_reference', [ids.sp, grp, '', value]);
        continue;
      }
      if (!value || typeof value !== 'object') continue;
      const object = value as Json;
      if (typeof object.resourceType === 'string') {
        if (typeof object.id === 'string') ctx.sink.add('idx_reference', [ids.sp, grp, object.resourceType, object.id]);
        continue;
      }
      if (typeof object.reference === 'string') {
        const key = ctx.references.parse(object.reference);
        if (key) ctx.sink.add('idx_reference', [ids.sp, grp, key.type, key.id]);
      }
      if (object.identifier && typeof object.identifier === 'object') {
        addTokenRows(
          { value: object.identifier, state: ctx.stateOf('Identifier') },
          { sp: ids.extraSp, extraSp: ids.extraSp },
          grp,
          ctx.sink,
        );
      }
    }
  },

  match(values, modifier, ctx): RowMatch {
    if (modifier === 'above' || modifier === 'below') {
      throw invalid(ctx.name, `${ctx.name}: the :${modifier} modifier on references is not supported`);
    }
    if (modifier === 'identifier') return this.matchIdentifier(values, ctx);
    const typed = modifier;
    const keys: [string, string][] = [];
    const bareIds: string[] = [];
    for (const raw of values) {
      const value = unescapeValue(raw);
      if (value === '') throw invalid(ctx.name, `${ctx.name}: empty value`);
      if (typed !== undefined) {
        if (value.includes('/')) {
          const key = ctx.references.parse(value);
          if (!key || key.type !== typed)
            throw invalid(ctx.name, `${ctx.name}: "${value}" is not a ${typed} reference`);
          keys.push([key.id, key.type]);
        } else keys.push([value, typed]);
        continue;
      }
      if (!value.includes('/') && !value.includes(':')) {
        bareIds.push(value);
        continue;
      }
      const key = ctx.references.parse(value);
      if (!key) throw invalid(ctx.name, `${ctx.name}: "${value}" is not a reference`);
      keys.push([key.id, key.type]);
    }
    const conditions: Sql[] = [];
    if (bareIds.length > 0) {
      // A bare id means any of the parameter's target types (ids are unique per type only).
      const ids = keyIn(
        ctx.dialect,
        ['target_id'],
        bareIds.map((id) => [id]),
      );
      conditions.push(and([ids, sql`t.target_type <> ''`]));
    }
    if (keys.length > 0) conditions.push(keyIn(ctx.dialect, ['target_id', 'target_type'], keys, ['target_type']));
    return { condition: or(conditions), selectivity: 1 };
  },

  matchIdentifier(values, ctx): RowMatch {
    const codes: string[] = [];
    const pairs: [string, string][] = [];
    for (const raw of values) {
      const parts = splitUnescaped(raw, '|').map(unescapeValue);
      if (parts.length > 2 || parts[parts.length - 1] === '') {
        throw invalid(ctx.name, `${ctx.name}: :identifier takes system|value or value, got "${raw}"`);
      }
      if (parts.length === 1) codes.push(parts[0]);
      else pairs.push([parts[1], parts[0]]);
    }
    return {
      condition: tokenEquals(ctx.dialect, codes, pairs, []),
      useExtraSp: true,
      table: 'idx_token',
      selectivity: 1,
    };
  },
};
