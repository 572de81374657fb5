/**
 * Evaluates FHIR invariants (https://hl7.org/fhir/R4/conformance-rules.html#constraints) with @medplum/core's
 * FHIRPath engine. Expressions are parsed once (see shapes.ts); evaluation needs no StructureDefinitions: the
 * engine's built-in data-type schema plus the types we pass in are enough for the R4 base invariants.
 */
import { evalFhirPathTyped, FhirPathAtom, ImpliesAtom, OrAtom, toTypedValue } from '@medplum/core';
import type { TypedValue } from '@medplum/core';
import { AppError } from '../errors.js';
import type { CompiledConstraint } from './shapes.js';

export interface InvariantScope {
  /** The resource that holds the element (%resource). */
  resource: TypedValue;
  /** The outermost resource: the container of a contained resource (%rootResource). */
  rootResource: TypedValue;
}

export type InvariantOutcome = 'pass' | 'fail' | 'error';

const UCUM = toTypedValue('http://unitsofmeasure.org');

/**
 * Constraint keys whose evaluation threw, with the first message, to diagnose the engine (a right side
 * that was not evaluated throws nothing).
 */
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
    return outcomeOf(constraint, context, variables);
  } catch (err) {
    // A budget that refuses the evaluation (a profile's invariant, under the request FHIRPath guard) is
    // the request's answer, not the expression's failure. medplum wraps what a node throws.
    for (let cause: unknown = err; cause instanceof Error; cause = cause.cause) {
      if (cause instanceof AppError) throw cause;
    }
    if (!invariantEvaluationErrors.has(constraint.key)) {
      invariantEvaluationErrors.set(constraint.key, (err as Error).message);
    }
    return 'error';
  }
}

/** The sides of an expression's top-level `or` or `implies`, each as an expression of its own. */
export interface ShortCircuit {
  readonly left: FhirPathAtom;
  readonly right: FhirPathAtom;
  readonly implies: boolean;
}

/** The sides of `atom`'s top-level `or` or `implies` (shapes.ts keeps them with the constraint). */
export function shortCircuitOf(atom: FhirPathAtom): ShortCircuit | undefined {
  const top = atom.child;
  if (!(top instanceof OrAtom || top instanceof ImpliesAtom)) return undefined;
  return {
    left: new FhirPathAtom(atom.original, top.left),
    right: new FhirPathAtom(atom.original, top.right),
    implies: top instanceof ImpliesAtom,
  };
}

/**
 * A side's result as the operator sees it: undefined when empty, the boolean when it is one plain boolean,
 * `other` for anything else (several items, another type, a boxed value), which the operator may read
 * differently than its value suggests.
 */
function sideValue(atom: FhirPathAtom, context: TypedValue, variables: Record<string, TypedValue>) {
  // Evaluated as the operator evaluates its operands: evalFhirPathTyped would unbox its results.
  const result = atom.eval({ variables }, [context]);
  if (result.length === 0) return undefined;
  const [only] = result;
  return result.length === 1 && only.type === 'boolean' && typeof only.value === 'boolean' ? only.value : 'other';
}

/**
 * Whether the expression yields `false`. A top-level `or` or `implies` is decided side by side, as
 * FHIRPath's three-valued logic allows: `true or x` and `{} or x` are never false whatever `x` is, nor
 * are `false implies x` and `{} implies x` (an `x` the engine cannot evaluate passed before too: see
 * evaluateInvariant), so the right side is not evaluated; after `false or` and `true implies` a right
 * side that is a plain boolean or empty decides. The right sides skipped so are the costly ones of the
 * commonest rules: ref-1 reads `%rootResource.contained` for every Reference (half of all validation
 * time on the Synthea fixtures) although only a `#` reference needs it. Any other result of a side
 * leaves it to the whole expression, evaluated as written, so nothing that failed before passes now,
 * nor the other way round.
 */
function outcomeOf(
  constraint: CompiledConstraint,
  context: TypedValue,
  variables: Record<string, TypedValue>,
): 'pass' | 'fail' {
  const sides = constraint.shortCircuit;
  if (sides) {
    const left = sideValue(sides.left, context, variables);
    // `true or x`, `false implies x`.
    const decisive = !sides.implies;
    if (left === undefined || left === decisive) return 'pass';
    if (left !== 'other') {
      const right = sideValue(sides.right, context, variables);
      if (right === false) return 'fail';
      if (right === undefined || right === true) return 'pass';
    }
  }
  const result = evalFhirPathTyped(constraint.atom, [context], variables);
  return result.length === 1 && result[0].value === false ? 'fail' : 'pass';
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
