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

/** `Patient?identifier=x|1` (a conditional reference) → its type and criteria; otherwise undefined. */
export function parseConditionalReference(reference: string): { type: string; query: string } | undefined {
  const match = /^([A-Z][A-Za-z]+)\?(.+)$/.exec(reference);
  return match ? { type: match[1], query: match[2] } : undefined;
}
