// Reference rewriting for transaction Bundles: fullUrls (urn:uuid:, urn:oid:, absolute) of entries
// become the `Type/id` the transaction assigns, in every reference of every entry, nested and contained.

/** Calls `visit` for every `reference` string in a resource, with a setter to replace it. */
export function forEachReference(
  value: unknown,
  visit: (reference: string, replace: (next: string) => void) => void,
): void {
  if (Array.isArray(value)) {
    for (const item of value) forEachReference(item, visit);
    return;
  }
  if (!value || typeof value !== 'object') return;
  const object = value as Record<string, unknown>;
  // for...in over own keys: Object.entries made an array per member of every object of every resource.
  for (const key in object) {
    if (!Object.hasOwn(object, key)) continue;
    const child = object[key];
    if (key === 'reference' && typeof child === 'string') visit(child, (next) => (object.reference = next));
    else if (child && typeof child === 'object') forEachReference(child, visit);
  }
}

/**
 * A copy of the JSON `value` with each `reference` string that `rewrite` maps replaced, in one pass
 * (structuredClone and then a walk over the copy were 5% of a PostgreSQL import's thread). Only for
 * JSON within the depth limits (json-limits.ts): it recurses.
 */
export function copyWithReferences(value: unknown, rewrite: (reference: string) => string | undefined): unknown {
  if (Array.isArray(value)) return value.map((item) => copyWithReferences(item, rewrite));
  if (!value || typeof value !== 'object') return value;
  const object = value as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const key in object) {
    if (!Object.hasOwn(object, key)) continue;
    const child = object[key];
    const next =
      key === 'reference' && typeof child === 'string' ? (rewrite(child) ?? child) : copyWithReferences(child, rewrite);
    // A member named __proto__ (JSON.parse makes it an own member) stays one, as structuredClone keeps it.
    if (key === '__proto__')
      Object.defineProperty(copy, key, { value: next, enumerable: true, writable: true, configurable: true });
    else copy[key] = next;
  }
  return copy;
}

/** `Patient?identifier=x|1` (a conditional reference) → its type and criteria; otherwise undefined. */
export function parseConditionalReference(reference: string): { type: string; query: string } | undefined {
  const match = /^([A-Z][A-Za-z]+)\?(.+)$/.exec(reference);
  return match ? { type: match[1], query: match[2] } : undefined;
}
