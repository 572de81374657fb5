import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixturesDir } from '../../test/support/fixtures.js';
import { copyWithReferences, forEachReference, ReferenceParser } from './references.js';

describe('copyWithReferences', () => {
  const resource = {
    resourceType: 'Observation',
    subject: { reference: 'urn:uuid:p', display: 'P' },
    performer: [{ reference: 'urn:uuid:d' }, { reference: 'Practitioner/kept' }, { display: 'no reference' }],
    contained: [{ resourceType: 'Provenance', target: [{ reference: 'urn:uuid:p' }] }],
    component: [{ valueQuantity: { value: 1.5 } }, { valueBoolean: false }, { valueString: '' }],
    note: [{ text: 'a "reference": "urn:uuid:p" in a text stays' }],
    extension: [{ url: 'x', valueReference: { reference: 'urn:uuid:d' } }],
    empty: null,
  };
  const rewrites = new Map([
    ['urn:uuid:p', 'Patient/1'],
    ['urn:uuid:d', 'Practitioner/2'],
  ]);

  it('copies JSON with the mapped references replaced at any depth, leaving the original as it was', () => {
    const before = structuredClone(resource);
    const copy = copyWithReferences(resource, (r) => rewrites.get(r)) as typeof resource;
    expect(resource).toEqual(before);
    // What structuredClone and a rewrite of the copy give (the way it was done before).
    const expected = structuredClone(resource);
    forEachReference(expected, (reference, replace) => {
      const next = rewrites.get(reference);
      if (next !== undefined) replace(next);
    });
    expect(JSON.stringify(copy)).toBe(JSON.stringify(expected));
    expect(copy.subject.reference).toBe('Patient/1');
    expect(copy.contained[0].target[0].reference).toBe('Patient/1');
    expect(copy.performer[1].reference).toBe('Practitioner/kept');
    // A copy, not shared.
    expect(copy.component).not.toBe(resource.component);
    expect(copy.component[0]).not.toBe(resource.component[0]);
  });

  it('keeps a member named __proto__ as a member, never as the prototype', () => {
    const parsed = JSON.parse(
      '{"resourceType":"Basic","__proto__":{"polluted":true},"subject":{"reference":"urn:uuid:p"}}',
    );
    const copy = copyWithReferences(parsed, (r) => rewrites.get(r)) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe(
      '{"resourceType":"Basic","__proto__":{"polluted":true},"subject":{"reference":"Patient/1"}}',
    );
  });

  it('copies every R4 example exactly when nothing is rewritten', () => {
    const dir = join(fixturesDir(), 'r4-spec-examples', 'by-type');
    let copied = 0;
    for (const type of readdirSync(dir)) {
      for (const file of readdirSync(join(dir, type))) {
        const text = readFileSync(join(dir, type, file), 'utf8');
        const example = JSON.parse(text) as unknown;
        expect(JSON.stringify(copyWithReferences(example, () => undefined))).toBe(JSON.stringify(example));
        copied++;
      }
    }
    expect(copied).toBeGreaterThan(100);
  });
});

describe('references', () => {
  const parser = new ReferenceParser('https://fhir.example/fhir', (t) => ['Patient', 'Observation'].includes(t));
  it.each([
    ['Patient/1', { type: 'Patient', id: '1' }],
    ['Patient/1/_history/3', { type: 'Patient', id: '1' }],
    ['https://fhir.example/fhir/Patient/1', { type: 'Patient', id: '1' }],
    ['http://fhir.example/fhir/Patient/1', { type: 'Patient', id: '1' }],
    ['https://other.example/fhir/Patient/1', { type: '', id: 'https://other.example/fhir/Patient/1' }],
    ['Foo/1', { type: '', id: 'Foo/1' }],
    ['urn:uuid:123', { type: '', id: 'urn:uuid:123' }],
    ['Patient?identifier=a|b', { type: '', id: 'Patient?identifier=a|b' }],
  ])('%s', (reference, expected) => {
    expect(parser.parse(reference)).toEqual(expected);
  });
  it('does not index contained references', () => {
    expect(parser.parse('#c1')).toBeUndefined();
  });
  it.each([
    ['Patient/1', { type: 'Patient', id: '1' }],
    ['https://fhir.example/fhir/Patient/1/_history/2', { type: 'Patient', id: '1' }],
    ['http://fhir.example/fhir/Observation/o', { type: 'Observation', id: 'o' }],
    ['https://fhir.example/fhir2/Patient/1', undefined],
    ['https://other.example/fhir/Patient/1', undefined],
    ['Foo/1', undefined],
    ['#c1', undefined],
    ['urn:uuid:123', undefined],
  ])('local(%s): the resource of this server it names, http or https alike', (reference, expected) => {
    expect(parser.local(reference)).toEqual(expected);
  });
  it('without a base knows relative references only', () => {
    const relativeOnly = new ReferenceParser(undefined, (t) => t === 'Patient');
    expect(relativeOnly.local('Patient/1')).toEqual({ type: 'Patient', id: '1' });
    expect(relativeOnly.local('https://fhir.example/fhir/Patient/1')).toBeUndefined();
  });
});
