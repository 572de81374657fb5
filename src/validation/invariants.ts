/**
 * Evaluates FHIR invariants (https://hl7.org/fhir/R4/conformance-rules.html#constraints) with @medplum/core's
 * FHIRPath engine. Expressions are parsed once (see shapes.ts); evaluation needs no StructureDefinitions: the
 * engine's built-in data-type schema plus the types we pass in are enough for the R4 base invariants.
 */
import { evalFhirPathTyped, toTypedValue, type TypedValue } from '@medplum/core';
import type { CompiledConstraint } from './shapes.js';

export interface InvariantScope {
  /** The resource that holds the element (%resource). */
  resource: TypedValue;
  /** The outermost resource: the container of a contained resource (%rootResource). */
  rootResource: TypedValue;
}

export type InvariantOutcome = 'pass' | 'fail' | 'error';

const UCUM = toTypedValue('http://unitsofmeasure.org');

/** Constraint keys whose evaluation threw, with the first message; the spec-example tests report these. */
export const invariantEvaluationErrors = new Map<string, string>();

/**
 * A constraint fails only when its expression yields `false`. An empty result means FHIRPath could not decide
 * (e.g. `{} implies x`, or dates of different precision compared): the spec's own examples rely on that passing,
 * e.g. ref-1 on a display-only Reference. An expression the engine cannot evaluate must never reject a resource.
 */
export function evaluateInvariant(
  constraint: CompiledConstraint,
  context: TypedValue,
  scope: InvariantScope,
): InvariantOutcome {
  // Most invariants test elements that are absent from most instances; the engine is slowest on absent names.
  if (constraint.roots && isObject(context.value) && !mentionsAny(context.value, constraint.roots)) {
    constraint.outcomeWhenRootsAbsent ??= evaluate(constraint, { type: context.type, value: {} }, scope);
    return constraint.outcomeWhenRootsAbsent;
  }
  return evaluate(constraint, context, scope);
}

function evaluate(constraint: CompiledConstraint, context: TypedValue, scope: InvariantScope): InvariantOutcome {
  const variables: Record<string, TypedValue> = {
    '%context': context,
    '%resource': scope.resource,
    '%rootResource': scope.rootResource,
    '%ucum': UCUM,
  };
  try {
    const result = evalFhirPathTyped(constraint.atom, [context], variables);
    return result.length === 1 && result[0].value === false ? 'fail' : 'pass';
  } catch (err) {
    if (!invariantEvaluationErrors.has(constraint.key)) {
      invariantEvaluationErrors.set(constraint.key, (err as Error).message);
    }
    return 'error';
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** True if a property of `value` may be what one of `names` reads: `value` reads `valueQuantity`, `_status`... */
function mentionsAny(value: Record<string, unknown>, names: string[]): boolean {
  for (const key of Object.keys(value)) {
    const name = key.startsWith('_') ? key.slice(1) : key;
    for (const root of names) {
      if (name === root || (name.startsWith(root) && isUpperCase(name.charCodeAt(root.length)))) return true;
    }
  }
  return false;
}

function isUpperCase(charCode: number): boolean {
  return charCode >= 65 && charCode <= 90;
}
