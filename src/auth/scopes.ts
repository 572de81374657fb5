// Scopes: SMART on FHIR system scopes (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html),
// v2 (`system/Patient.rs`, `system/*.cruds`) and v1 (`system/*.read`, `.write`, `.*`), plus the scribe
// API's `scribe.read` and `scribe.write`. Parsing is pure; a ScopeSet answers "may I?" with one bit test.
import type { FhirAction } from './principal.js';

/** The SMART v2 letters, in the order the spec writes them, and the bit each one sets. */
const LETTERS = ['c', 'r', 'u', 'd', 's'] as const;
const BIT: Record<string, number> = { c: 1, r: 2, u: 4, d: 8, s: 16 };
const ALL = 31;
const ACTION_BIT: Record<FhirAction, number> = { create: 1, read: 2, update: 4, delete: 8, search: 16 };
/** SMART v1 permissions: read = read + search, write = create + update + delete, * = everything. */
const V1_BITS: Record<string, number> = { read: BIT.r | BIT.s, write: BIT.c | BIT.u | BIT.d, '*': ALL };

export const SCRIBE_SCOPES = ['scribe.read', 'scribe.write'] as const;
export const DEFAULT_SCOPES = ['system/*.cruds', 'scribe.read', 'scribe.write'] as const;

export type ParsedScope =
  | { readonly kind: 'fhir'; readonly scope: string; readonly type: string; readonly bits: number }
  | { readonly kind: 'named'; readonly scope: string };

const FHIR_SCOPE = /^system\/(\*|[A-Z][A-Za-z]{0,63})\.(.+)$/;

/**
 * Parses one scope, or explains why it is not one this server grants. `isResourceType`, when given,
 * also rejects a type that FHIR R4 does not define (a typo would otherwise grant nothing, silently).
 */
export function parseScope(scope: string, isResourceType?: (name: string) => boolean): ParsedScope | string {
  if ((SCRIBE_SCOPES as readonly string[]).includes(scope)) return { kind: 'named', scope };
  if (/^(patient|user)\//.test(scope)) {
    return `"${scope}": only system/ scopes exist here (service accounts have no patient or user context)`;
  }
  if (scope.includes('?')) return `"${scope}": scopes with query parameters are not supported`;
  const match = FHIR_SCOPE.exec(scope);
  if (!match) {
    return `"${scope}" is not a scope this server knows: use system/<Type|*>.<cruds letters> (SMART v2), system/<Type|*>.read|write|* (v1), scribe.read or scribe.write`;
  }
  const [, type, permissions] = match;
  if (type !== '*' && isResourceType && !isResourceType(type)) {
    return `"${scope}": ${type} is not a FHIR R4 resource type`;
  }
  const bits = V1_BITS[permissions] ?? v2Bits(permissions);
  if (bits === undefined) {
    return `"${scope}": the permissions after the dot must be letters from "cruds" in that order (e.g. rs, cruds), or read, write or *`;
  }
  return { kind: 'fhir', scope, type, bits };
}

function v2Bits(letters: string): number | undefined {
  let bits = 0;
  let next = 0;
  for (const letter of letters) {
    const index = LETTERS.indexOf(letter as (typeof LETTERS)[number], next);
    if (index < 0) return undefined;
    bits |= BIT[letter];
    next = index + 1;
  }
  return bits === 0 ? undefined : bits;
}

/** Splits a space-separated scope string (OAuth's form) into its scopes, without duplicates. */
export function splitScopes(value: string): string[] {
  return [...new Set(value.split(/\s+/).filter((s) => s !== ''))];
}

/**
 * Validates a list of scopes (an account's, or a token request's). Returns the scopes, deduplicated and in
 * their given order, or throws a ScopeError naming every bad one.
 */
export function validateScopes(scopes: readonly string[], isResourceType?: (name: string) => boolean): string[] {
  const problems: string[] = [];
  for (const scope of scopes) {
    const parsed = parseScope(scope, isResourceType);
    if (typeof parsed === 'string') problems.push(parsed);
  }
  if (problems.length > 0) throw new ScopeError(problems.join('; '));
  return [...new Set(scopes)];
}

export class ScopeError extends Error {}

/** A set of scopes compiled for quick questions: one bit mask per resource type, one for `*`. */
export class ScopeSet {
  private readonly wildcard: number;
  private readonly byType = new Map<string, number>();
  private readonly named = new Set<string>();

  /** Scopes that do not parse grant nothing (tokens only ever carry scopes that were valid when issued). */
  constructor(readonly scopes: readonly string[]) {
    let wildcard = 0;
    for (const scope of scopes) {
      const parsed = parseScope(scope);
      if (typeof parsed === 'string') continue;
      if (parsed.kind === 'named') this.named.add(parsed.scope);
      else if (parsed.type === '*') wildcard |= parsed.bits;
      else this.byType.set(parsed.type, (this.byType.get(parsed.type) ?? 0) | parsed.bits);
    }
    this.wildcard = wildcard;
  }

  static of(value: string): ScopeSet {
    return new ScopeSet(splitScopes(value));
  }

  allows(action: FhirAction, type: string): boolean {
    return ((this.wildcard | (this.byType.get(type) ?? 0)) & ACTION_BIT[action]) !== 0;
  }

  has(scope: string): boolean {
    return this.named.has(scope);
  }

  /** Does this set grant at least everything `scope` grants? (For narrowing at the token endpoint.) */
  covers(scope: ParsedScope): boolean {
    if (scope.kind === 'named') return this.named.has(scope.scope);
    const granted = scope.type === '*' ? this.wildcard : this.wildcard | (this.byType.get(scope.type) ?? 0);
    return (granted & scope.bits) === scope.bits;
  }
}
