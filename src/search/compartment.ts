// Compartments (https://hl7.org/fhir/R4/compartmentdefinition.html, https://hl7.org/fhir/R4/search.html#2.21.1.2):
// which types a compartment search reads and the criterion that keeps a search inside the compartment,
// from the R4 CompartmentDefinitions compiled into generated/r4.json (definitions/build-r4.ts). Pure:
// no database; the criterion is compiled like any other (sql/compile.ts), so every search feature works
// inside a compartment.
import type { CompartmentRule } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { spId } from './catalog.js';
import type { PlannedCriterion } from './plan.js';

/** The member types of a compartment, sorted. */
export function memberTypes(rule: CompartmentRule): string[] {
  return Object.keys(rule.members).sort();
}

/**
 * The types a compartment search reads: `*` → every member type the caller may search, narrowed by
 * `_type` when given (403 for a named type it may not search, 400 for a non-member); a named type → that
 * type (400 when not a member, 403 when the caller may not search it).
 */
export function compartmentSearchTypes(
  rule: CompartmentRule,
  type: string,
  requested: readonly string[] | undefined,
  canSearch: (type: string) => boolean,
): string[] {
  const notMember = (t: string, expression?: string): AppError =>
    new AppError(
      'invalid-search',
      `${t} is not in the ${rule.code} compartment (${rule.url}); its members are ${memberTypes(rule).join(', ')}`,
      expression ? { expression } : undefined,
    );
  const forbidden = (t: string): AppError =>
    new AppError('forbidden', `The token's scopes do not allow search on ${t} (needs system/${t}.s or wider)`);
  if (type !== '*') {
    if (requested) {
      throw new AppError('invalid-search', '_type applies to a compartment search of all types (/*) only', {
        expression: '_type',
      });
    }
    if (!rule.members[type]) throw notMember(type);
    if (!canSearch(type)) throw forbidden(type);
    return [type];
  }
  if (requested) {
    for (const t of requested) {
      if (!rule.members[t]) throw notMember(t, '_type');
      if (!canSearch(t)) throw forbidden(t);
    }
    return [...new Set(requested)].sort();
  }
  // `*`: the types the caller may not see are left out, silently (R4 search.html#2.21.1.2).
  const types = memberTypes(rule).filter(canSearch);
  if (types.length === 0) {
    throw new AppError(
      'forbidden',
      `The token's scopes do not allow search on any type of the ${rule.code} compartment`,
    );
  }
  return types;
}

/**
 * The criterion "in `rule.code/id`'s compartment" for resources of `types` (all members): any of each
 * type's compartment parameters refers to it, or the resource is `rule.code/id` itself.
 */
export function compartmentCriterion(rule: CompartmentRule, id: string, types: readonly string[]): PlannedCriterion {
  const refSps: number[] = [];
  let selfType: string | undefined;
  for (const type of types) {
    const member = rule.members[type];
    if (!member) throw new Error(`${type} is not a member of the ${rule.code} compartment`);
    for (const param of member.params) refSps.push(spId(type, param));
    if (member.self) selfType = type;
  }
  return { kind: 'compartment', compartmentType: rule.code, id, refSps, selfType, selectivity: 1 };
}
