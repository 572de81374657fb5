import { describe, expect, it } from 'vitest';
import { expressionForType, splitTopLevelUnion } from './build-r4.js';

describe('search parameter expressions', () => {
  it('splits a union at the top level only', () => {
    expect(splitTopLevelUnion("A.b | (C.d as E) | F.g.where(h = 'x|y') | I.j.where(k | l)")).toEqual([
      'A.b',
      '(C.d as E)',
      "F.g.where(h = 'x|y')",
      'I.j.where(k | l)',
    ]);
  });

  it('keeps the branches of the resource type, with their filters', () => {
    const expression =
      'AllergyIntolerance.patient | CarePlan.subject.where(resolve() is Patient) | Observation.subject.where(resolve() is Patient)';
    expect(expressionForType(expression, 'CarePlan')).toBe('CarePlan.subject.where(resolve() is Patient)');
    expect(expressionForType('(ActivityDefinition.useContext.value as CodeableConcept)', 'ActivityDefinition')).toBe(
      '(ActivityDefinition.useContext.value as CodeableConcept)',
    );
  });

  it('rewrites Resource-level expressions to the concrete type', () => {
    expect(expressionForType('Resource.meta.tag', 'Patient')).toBe('Patient.meta.tag');
  });
});
