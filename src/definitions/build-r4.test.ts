import { describe, expect, it } from 'vitest';
import {
  compileSummaryElements,
  expressionForType,
  isR4StructureDefinition,
  readDefinitionsBundle,
  splitTopLevelUnion,
} from './build-r4.js';
import { loadR4Definitions } from './registry.js';

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

describe('summary elements', () => {
  const registry = loadR4Definitions();

  it('in generated/r4.json are those of the R4 definitions', () => {
    const resourceSds = readDefinitionsBundle('profiles-resources.json').filter(isR4StructureDefinition);
    const fromDefinitions = compileSummaryElements(resourceSds);
    expect(Object.keys(fromDefinitions).sort()).toEqual(registry.resourceTypes);
    for (const type of registry.resourceTypes) {
      expect(registry.summaryElements(type), type).toEqual(fromDefinitions[type]);
    }
  });

  it('are the top-level isSummary elements, choice elements without [x]', () => {
    expect(registry.summaryElements('Patient')).toEqual(
      expect.arrayContaining(['id', 'meta', 'identifier', 'name', 'birthDate', 'deceased', 'managingOrganization']),
    );
    expect(registry.summaryElements('Patient')).not.toContain('contact');
    expect(registry.summaryElements('Patient')).not.toContain('link.other'); // isSummary, but not top-level
    expect(registry.summaryElements('Observation')).toEqual(expect.arrayContaining(['code', 'subject', 'value']));
    expect(registry.summaryElements('Observation')).not.toContain('note');
    expect(registry.summaryElements('NotAType')).toEqual([]);
  });
});
