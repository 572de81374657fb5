import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from './registry.js';

const registry = loadR4Definitions();

describe('R4 registry', () => {
  it('lists the concrete R4 resource types only, sorted', () => {
    expect(registry.resourceTypes).toHaveLength(146);
    expect([...registry.resourceTypes].sort()).toEqual(registry.resourceTypes);
    expect(registry.isResourceType('Patient')).toBe(true);
    expect(registry.isResourceType('SubscriptionStatus')).toBe(false); // R4B
    expect(registry.isResourceType('DomainResource')).toBe(false); // abstract
    expect(registry.isResourceType('HumanName')).toBe(false);
  });

  it('is loaded once per path', () => {
    expect(loadR4Definitions()).toBe(registry);
  });

  it('tells the user to build when the generated file is missing', () => {
    const missing = join(mkdtempSync(join(tmpdir(), 'r4-')), 'r4.json');
    expect(() => loadR4Definitions(missing)).toThrow(/npm run build/);
  });

  it('tells the user to build when the generated file predates the summary elements', () => {
    const stale = join(mkdtempSync(join(tmpdir(), 'r4-')), 'r4.json');
    writeFileSync(stale, JSON.stringify({ fhirVersion: '4.0.1', resourceTypes: [] }));
    expect(() => loadR4Definitions(stale)).toThrow(/older build: run `npm run build`/);
  });

  it('tells the user to build when the generated file lacks the required value sets (build-r4 alone ran)', () => {
    const partial = join(mkdtempSync(join(tmpdir(), 'r4-')), 'r4.json');
    writeFileSync(partial, JSON.stringify({ fhirVersion: '4.0.1', resourceTypes: [], summaryElements: {} }));
    expect(() => loadR4Definitions(partial)).toThrow(/lack the required value sets' codes: run `npm run build`/);
  });

  it('looks up element rules by relative or prefixed path', () => {
    expect(registry.element('Patient', 'gender')).toEqual({
      types: [{ code: 'code' }],
      binding: 'http://hl7.org/fhir/ValueSet/administrative-gender',
    });
    expect(registry.element('Patient', 'Patient.contact.name')).toEqual({ types: [{ code: 'HumanName' }] });
    expect(registry.element('Patient', 'id')).toEqual({ types: [{ code: 'id' }] });
    expect(registry.element('Observation', 'value[x]')?.choice).toBe(true);
    expect(registry.element('Observation', 'subject')?.types).toEqual([
      { code: 'Reference', targets: ['Patient', 'Group', 'Device', 'Location'] },
    ]);
    expect(registry.element('Observation', 'referenceRange.low')?.types).toEqual([
      { code: 'Quantity', profile: 'SimpleQuantity' },
    ]);
    expect(registry.element('Appointment', 'status')?.min).toBe(1);
  });

  it('keeps recursive elements as content references', () => {
    expect(registry.element('Questionnaire', 'item.item')).toEqual({ max: '*', contentReference: 'item' });
    expect(registry.element('Bundle', 'entry.link')).toEqual({ max: '*', contentReference: 'link' });
  });

  it('keeps error invariants where they are declared, not where snapshots repeat them', () => {
    expect(registry.element('Patient', 'contact')?.constraints?.map((c) => c.key)).toEqual(['pat-1']);
    expect(registry.type('Period')?.constraints?.map((c) => c.key)).toEqual(['per-1']);
    expect(registry.type('DomainResource')?.constraints?.map((c) => c.key)).toEqual(['dom-2', 'dom-4', 'dom-5']);
    expect(registry.type('Patient')?.constraints).toBeUndefined();
    expect(registry.type('Patient')?.base).toBe('DomainResource');
    expect(registry.skippedConstraints.map((c) => c.key)).toEqual(
      expect.arrayContaining(['ele-1', 'ext-1', 'dom-3', 'txt-1', 'txt-2']),
    );
  });

  it('carries the primitive types with the spec regexes', () => {
    expect(registry.primitiveType('id')).toEqual({ json: 'string', regex: '[A-Za-z0-9\\-\\.]{1,64}' });
    expect(registry.primitiveType('integer')).toMatchObject({ json: 'number', maxValue: 2147483647 });
  });

  it('expands required value sets, and marks the unexpandable ones unchecked', () => {
    expect(registry.valueSet('http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1')).toEqual({
      codes: { 'http://hl7.org/fhir/administrative-gender': ['female', 'male', 'other', 'unknown'] },
    });
    expect(registry.valueSet('http://hl7.org/fhir/ValueSet/mimetypes')).toEqual({ unchecked: expect.any(String) });
  });

  it('gives each resource type its search parameters, with the expression for that type only', () => {
    expect(registry.searchParameter('Patient', 'birthdate')).toMatchObject({
      type: 'date',
      expression: 'Patient.birthDate',
      comparators: expect.arrayContaining(['ge', 'le']),
      modifiers: ['missing'],
      multipleOr: true,
      multipleAnd: true,
    });
    expect(registry.searchParameter('CarePlan', 'patient')).toMatchObject({
      type: 'reference',
      expression: 'CarePlan.subject.where(resolve() is Patient)',
      targets: ['Patient'],
    });
    expect(registry.searchParameter('Observation', '_id')?.expression).toBe('Observation.id');
    expect(registry.searchParameter('Observation', '_lastUpdated')?.expression).toBe('Observation.meta.lastUpdated');
    expect(registry.searchParameter('Observation', 'code')?.modifiers).toContain('text');
    expect(registry.searchParameter('Observation', 'code-value-quantity')).toMatchObject({
      type: 'composite',
      expression: 'Observation',
      multipleOr: false,
      components: [
        { code: 'code', expression: 'code' },
        { code: 'value-quantity', expression: 'value.as(Quantity)' },
      ],
    });
    expect(registry.searchParameters('Patient').map((p) => p.code)).toContain('general-practitioner');
    expect(registry.searchParameters('SubscriptionStatus')).toEqual([]);
  });

  it('drops search parameters that are not R4 4.0.1', () => {
    expect(registry.searchParameter('DeviceDefinition', 'classification')).toBeUndefined();
  });
});
