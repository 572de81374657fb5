// References (https://hl7.org/fhir/R4/references.html#literal): the one parser that tells a reference to
// a resource of this server from any other, used by indexing, resource links, validation and so
// includes; and the rewriting of transaction Bundles: fullUrls (urn:uuid:, urn:oid:, absolute) of
// entries become the `Type/id` the transaction assigns, in every reference of every entry.
import { RELATIVE_REFERENCE } from './ids.js';

export interface ReferenceKey {
  /** '' for a URL. */
  readonly type: string;
  /** The id, or the whole URL when type is ''. */
  readonly id: string;
}

const LOCAL = new RegExp(`^${RELATIVE_REFERENCE}$`);

/**
 * A reference is local when it is `Type/id` (optionally `/_history/vid`) with a type R4 defines, either
 * relative or absolute on the server's own FHIR base, in http or https (a proxy may end TLS, so both
 * spellings of the configured base name this server). Everything else (other servers, canonicals,
 * urn:uuid, conditional references, `#contained`) is not a resource of this server.
 */
export class ReferenceParser {
  private readonly bases: string[];

  /** @param baseUrl the server's FHIR base (`https://host/fhir`); undefined: relative references only. */
  constructor(
    baseUrl: string | undefined,
    private readonly isResourceType: (name: string) => boolean,
  ) {
    const withoutScheme = baseUrl?.replace(/\/+$/, '').replace(/^https?:\/\//, '');
    this.bases = withoutScheme === undefined ? [] : [`http://${withoutScheme}/`, `https://${withoutScheme}/`];
  }

  /** The resource of this server a reference names, or undefined. */
  local(reference: string): { type: string; id: string } | undefined {
    let relative = reference;
    for (const base of this.bases) {
      if (reference.startsWith(base)) {
        relative = reference.slice(base.length);
        break;
      }
    }
    const m = LOCAL.exec(relative);
    return m && this.isResourceType(m[1]) ? { type: m[1], id: m[2] } : undefined;
  }

  /** As the reference index stores it: a local reference split, any other kept whole; `#x` and '' not at all. */
  parse(reference: string): ReferenceKey | undefined {
    if (reference === '' || reference.startsWith('#')) return undefined;
    return this.local(reference) ?? { type: '', id: reference };
  }
}

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
