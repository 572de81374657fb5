import { evalFhirPathTyped, parseFhirPath, toTypedValue } from '@medplum/core';
import type { TypedValue } from '@medplum/core';
import { describe, expect, it } from 'vitest';
import { evaluateInvariant, shortCircuitOf } from './invariants.js';
import type { InvariantScope } from './invariants.js';
import type { CompiledConstraint } from './shapes.js';

const constraint = (expression: string): CompiledConstraint => {
  const atom = parseFhirPath(expression);
  return { key: 'test-1', human: expression, expression, atom, shortCircuit: shortCircuitOf(atom) };
};

const scopeOf = (resource: unknown): InvariantScope => ({
  resource: toTypedValue(resource),
  rootResource: toTypedValue(resource),
});

/** The outcome of the whole expression as the engine evaluates it, both sides always. */
function whole(expression: string, context: TypedValue, scope: InvariantScope): 'pass' | 'fail' | 'error' {
  try {
    const result = evalFhirPathTyped(parseFhirPath(expression), [context], {
      '%context': context,
      '%resource': scope.resource,
      '%rootResource': scope.rootResource,
    });
    return result.length === 1 && result[0].value === false ? 'fail' : 'pass';
  } catch {
    return 'error';
  }
}

const REF_1 =
  "reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids'))";
const PER_1 = 'start.hasValue().not() or end.hasValue().not() or (start <= end)';

// A top-level `or` or `implies` is decided side by side (invariants.ts): never otherwise than the whole.
describe('invariants decided side by side', () => {
  const cases: [expression: string, value: Record<string, unknown>, fails: boolean][] = [
    // or: a true left side decides; after a false one the right side does.
    [REF_1, { reference: 'Patient/1' }, false],
    [REF_1, { reference: '#p1' }, false],
    [REF_1, { reference: '#gone' }, true],
    [REF_1, { display: 'no reference at all' }, false],
    ['a = 1 or b = 2', { a: 2, b: 2 }, false],
    ['a = 1 or b = 2', { a: 2, b: 3 }, true],
    ['a = 1 or b = 2', { a: 2 }, false],
    ['a = 1 or b = 2', { b: 3 }, false],
    // A left side that is not a single boolean: the whole expression decides.
    ['a or b = 2', { a: 'text', b: 3 }, false],
    ['a or b = 2', { a: ['x', 'y'], b: 3 }, false],
    [PER_1, { start: '2020-01-01', end: '2021-01-01' }, false],
    [PER_1, { start: '2021-01-01', end: '2020-01-01' }, true],
    [PER_1, { start: '2021-01-01' }, false],
    // implies: a false or empty left side decides; after a true one the right side does.
    ['a.exists() implies b.exists()', {}, false],
    ['a.exists() implies b.exists()', { a: 1 }, true],
    ['a.exists() implies b.exists()', { a: 1, b: 1 }, false],
    ['a = 1 implies b = 2', { a: 2, b: 3 }, false],
    ['a = 1 implies b = 2', { a: 1, b: 3 }, true],
    ['a = 1 implies b = 2', { a: 1 }, false],
    ['a = 1 implies b = 2', {}, false],
    ['a = 1 implies b.foo()', {}, false],
    ['a implies b = 2', { a: 'text', b: 3 }, false],
    // Neither `or` nor `implies` at the top.
    ['a = 1 and b = 2', { a: 1, b: 3 }, true],
    ['a.exists()', {}, true],
  ];
  const resource = { resourceType: 'Observation', contained: [{ resourceType: 'Patient', id: 'p1' }] };

  it.each(cases)('%s on %j', (expression, value, fails) => {
    const context = toTypedValue(value);
    expect(constraint(expression).shortCircuit !== undefined).toBe(/ (or|implies) /.test(expression));
    const scope = scopeOf(resource);
    const outcome = evaluateInvariant(constraint(expression), context, scope);
    expect(outcome === 'fail').toBe(fails);
    expect(outcome === 'fail').toBe(whole(expression, context, scope) === 'fail');
  });

  it('does not evaluate the right side where the left one decides', () => {
    const scope = scopeOf({ resourceType: 'Basic' });
    // The right sides throw when evaluated (a list where one value is expected, an unknown function).
    expect(evaluateInvariant(constraint('a.exists() or (1 | 2).single() = 1'), toTypedValue({ a: 1 }), scope)).toBe(
      'pass',
    );
    expect(evaluateInvariant(constraint('a.exists() implies b.foo()'), toTypedValue({}), scope)).toBe('pass');
    // Where it does not decide, the right side is evaluated, and its error is an error as before.
    expect(evaluateInvariant(constraint('a.exists() or (1 | 2).single() = 1'), toTypedValue({}), scope)).toBe('error');
    expect(evaluateInvariant(constraint('a.exists() implies b.foo()'), toTypedValue({ a: 1 }), scope)).toBe('error');
  });

  // A boolean element read through the engine's type schema with a `_` sibling comes out boxed (a
  // Boolean object holding the extension), which `or` and `implies` read otherwise than a plain boolean.
  it.each([
    ['userSelected or (1 = 2)', false],
    ['userSelected or (1 = 2)', true],
    ['(1 = 1) implies userSelected', false],
    ['(1 = 1) implies userSelected', true],
    ['userSelected implies (1 = 2)', false],
    ['userSelected implies (1 = 2)', true],
  ] as const)('%s on a Coding whose userSelected is %s, with an extension', (expression, userSelected) => {
    const context: TypedValue = {
      type: 'Coding',
      value: { code: 'x', userSelected, _userSelected: { id: 'u' } },
    };
    const scope = scopeOf(resource);
    const outcome = evaluateInvariant(constraint(expression), context, scope);
    expect(outcome === 'fail').toBe(whole(expression, context, scope) === 'fail');
  });
});
