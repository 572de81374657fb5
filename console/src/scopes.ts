// What the signed-in account may do, from the scopes the token endpoint granted (docs/api.md "Scopes"):
// SMART v2 `system/<Type|*>.<cruds letters>` and the v1 forms `.read` (= rs), `.write` (= cud), `.*`.
// Only for what the console offers: the server decides every request on its own.

export type Letter = 'c' | 'r' | 'u' | 'd' | 's';

const V1: Record<string, string> = { read: 'rs', write: 'cud', '*': 'cruds' };

/** The letters each scope grants, by type (`*` for every type). */
function grants(scopes: readonly string[]): Map<string, string> {
  const byType = new Map<string, string>();
  for (const scope of scopes) {
    const match = /^system\/([A-Za-z]+|\*)\.([a-z*]+)$/.exec(scope);
    if (!match) continue;
    const [, type, access] = match;
    const letters = V1[access] ?? (/^c?r?u?d?s?$/.test(access) ? access : '');
    byType.set(type, (byType.get(type) ?? '') + letters);
  }
  return byType;
}

export function may(scopes: readonly string[], type: string, letter: Letter): boolean {
  const byType = grants(scopes);
  return (byType.get('*') ?? '').includes(letter) || (byType.get(type) ?? '').includes(letter);
}

/** The types of `known` these scopes may search, in order. */
export function searchableTypes(scopes: readonly string[], known: readonly string[]): string[] {
  return known.filter((type) => may(scopes, type, 's'));
}
