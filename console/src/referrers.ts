// "Referred to by": the resources that refer to one resource, found the `_revinclude` way. For a
// resource T/id the console asks `GET /fhir/T?_id=id&_elements=id&_revinclude=A:*&_revinclude=B:*...`,
// one directive per type that has a reference search parameter able to target T (`A:*`: all of A's
// reference parameters; the reference index holds only references of the types each one allows),
// 16 directives a request (the server's limit, docs/search.md "Limits"), at most 3 requests at once.
// Only the types the account may search are asked for: the server would refuse the others (403).
import consoleTypes from '../../generated/console-types.json';
import { api } from './api';
import type { ApiResponse } from './api';
import { may } from './scopes';

type Targets = readonly string[] | { readonly allBut: readonly string[] };

/** Per type with reference search parameters, the types they can target (scripts/build-console.mjs). */
const REFERENCE_TARGETS: Readonly<Record<string, Targets>> = consoleTypes.referenceTargets;

/** `_include` and `_revinclude` directives the server takes in one search. */
export const MAX_DIRECTIVES = 16;
/** Requests in flight at once. */
export const MAX_PARALLEL = 3;

export interface ResourceKey {
  readonly type: string;
  readonly id: string;
}

export interface Referrers {
  /** Every resource found, each once, in the order found. */
  readonly found: readonly ResourceKey[];
  /** False when a search left resources out (the server's cap of 1,000 included resources a page). */
  readonly complete: boolean;
  /** How many types can refer to it. */
  readonly candidates: number;
  /** Types that can refer to it but that the account may not search: not asked for. */
  readonly notAllowed: readonly string[];
  /** Types whose request failed, with the server's words. */
  readonly failed: readonly { readonly types: readonly string[]; readonly message: string }[];
  /** Requests made. */
  readonly requests: number;
  /** False when the account may not search the resource's own type, which every such request is. */
  readonly searchable: boolean;
}

const targets = (source: string, target: string): boolean => {
  const t = REFERENCE_TARGETS[source];
  return Array.isArray(t) ? t.includes(target) : !(t as { allBut: readonly string[] }).allBut.includes(target);
};

/** The types with a reference search parameter that can target `target`, in name order. */
export function referringTypes(target: string): string[] {
  return Object.keys(REFERENCE_TARGETS)
    .filter((source) => targets(source, target))
    .sort();
}

/** `items` in consecutive groups of at most `size`. */
export function groupsOf<T>(items: readonly T[], size: number): T[][] {
  const groups: T[][] = [];
  for (let i = 0; i < items.length; i += size) groups.push(items.slice(i, i + size));
  return groups;
}

/** The search that returns what of `sources` refers to type/id: the resource and, as includes, those. */
export function revincludePath(type: string, id: string, sources: readonly string[]): string {
  const params = new URLSearchParams({ _id: id, _elements: 'id' });
  for (const source of sources) params.append('_revinclude', `${source}:*`);
  return `/fhir/${encodeURIComponent(type)}?${params}`;
}

/** Runs `work` on every item, at most `limit` at once; the results in the items' order. */
export async function inParallel<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const at = next++;
      results[at] = await work(items[at]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

interface SearchBundle {
  entry?: {
    resource?: { resourceType?: string; id?: string; issue?: { code?: string }[] };
    search?: { mode?: string };
  }[];
}

/** The included resources of one answer, and whether the server said it left some out. */
export function includedOf(bundle: SearchBundle): { found: ResourceKey[]; complete: boolean } {
  const found: ResourceKey[] = [];
  let complete = true;
  for (const { resource, search } of bundle.entry ?? []) {
    if (!resource) continue;
    if (search?.mode === 'include' && resource.resourceType && resource.id) {
      found.push({ type: resource.resourceType, id: resource.id });
    } else if (search?.mode === 'outcome' && resource.issue?.some((i) => i.code !== 'not-supported')) {
      // The cap on included resources, the page's byte budget or a replica behind: some left out.
      complete = false;
    }
  }
  return { found, complete };
}

type Ask = (path: string) => Promise<ApiResponse<SearchBundle>>;

/** What refers to type/id, among the types `scopes` may search. */
export async function findReferrers(
  type: string,
  id: string,
  scopes: readonly string[],
  ask: Ask = (path) => api<SearchBundle>(path),
): Promise<Referrers> {
  const sources = referringTypes(type);
  const searchable = may(scopes, type, 's');
  const allowed = searchable ? sources.filter((s) => may(scopes, s, 's')) : [];
  const groups = groupsOf(allowed, MAX_DIRECTIVES);
  const answers = await inParallel(groups, MAX_PARALLEL, (group) =>
    ask(revincludePath(type, id, group)).then(
      (r) => ({ group, ...includedOf(r.body) }),
      (e: unknown) => ({ group, error: e instanceof Error ? e.message : String(e) }),
    ),
  );
  const seen = new Set<string>([`${type}/${id}`]);
  const found: ResourceKey[] = [];
  const failed: { types: string[]; message: string }[] = [];
  let complete = true;
  for (const answer of answers) {
    if ('error' in answer) {
      failed.push({ types: answer.group, message: answer.error });
      continue;
    }
    complete &&= answer.complete;
    for (const r of answer.found) {
      const key = `${r.type}/${r.id}`;
      if (seen.has(key)) continue;
      seen.add(key);
      found.push(r);
    }
  }
  return {
    found,
    complete,
    candidates: sources.length,
    notAllowed: searchable ? sources.filter((s) => !allowed.includes(s)) : [],
    failed,
    requests: groups.length,
    searchable,
  };
}

/**
 * The first `n` of `found` to show: in turn one of each type, then a second of each, ..., so that every
 * type that refers to it shows before any type shows many; then grouped by type, in name order.
 */
export function firstOfEachType(found: readonly ResourceKey[], n: number): ResourceKey[] {
  const byType = new Map<string, ResourceKey[]>();
  for (const r of found) {
    const list = byType.get(r.type);
    if (list) list.push(r);
    else byType.set(r.type, [r]);
  }
  const types = [...byType.keys()].sort();
  const picked: ResourceKey[] = [];
  for (let round = 0; picked.length < n; round++) {
    const row = types.flatMap((t) => byType.get(t)![round] ?? []);
    if (row.length === 0) break;
    picked.push(...row.slice(0, n - picked.length));
  }
  return picked.sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}
