// URI parameters (https://hl7.org/fhir/R4/search.html#uri). Rows: idx_uri(uri), the value as written.
// Default and `:exact`-like matching is equality; `:below` = starts with (an index range), `:above` =
// the value is one of the stored URI's ancestors, i.e. the stored URI is a prefix of the search value
// at a `/` boundary (computed as an IN list of the value's prefixes).
import type { Node } from '../expressions/evaluate.js';
import { or, raw } from '../sql/fragment.js';
import { keyIn, keyStartsWith, keyTiebreak } from '../sql/keyed.js';
import { unescapeValue } from '../values/escapes.js';
import type { ExtractContext, ParamIds, ParamTypeHandler, RowMatch } from './param-type.js';
import { assertModifier, invalid } from './param-type.js';

/** `http://a/b/c` → `http://a/b/c`, `http://a/b`, `http://a`. */
function ancestors(uri: string): string[] {
  const out = [uri];
  const start = uri.indexOf('://') >= 0 ? uri.indexOf('://') + 3 : 0;
  for (let i = uri.length - 1; i > start; i--) if (uri[i] === '/') out.push(uri.slice(0, i));
  return out;
}

export const uriParam: ParamTypeHandler = {
  type: 'uri',
  table: 'idx_uri',
  modifiers: ['above', 'below'],
  sort: { column: raw('t.uri'), tiebreak: [keyTiebreak('uri')] },

  extract(nodes: readonly Node[], ids: ParamIds, grp, ctx: ExtractContext): void {
    for (const node of nodes) {
      if (typeof node.value === 'string' && node.value !== '') ctx.sink.add('idx_uri', [ids.sp, grp, node.value]);
    }
  },

  match(values, modifier, ctx): RowMatch {
    assertModifier(this, ctx.name, modifier);
    const uris = values.map((raw) => {
      const uri = unescapeValue(raw);
      if (uri === '') throw invalid(ctx.name, `${ctx.name}: empty value`);
      return uri;
    });
    if (modifier === 'below') {
      return {
        condition: or(uris.map((uri) => keyStartsWith('uri', uri))),
        rangeValues: uris.length,
        selectivity: 2,
      };
    }
    const wanted = modifier === 'above' ? [...new Set(uris.flatMap(ancestors))] : uris;
    return {
      condition: keyIn(
        ctx.dialect,
        ['uri'],
        wanted.map((uri) => [uri]),
      ),
      selectivity: 1,
    };
  },
};
