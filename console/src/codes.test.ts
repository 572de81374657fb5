/// <reference types="node" />
// (Node types for this test only: it reads the R4 definitions to check the console's compiled bindings against them.)
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bindingsOf, expandPath, insertAt, insertionFor } from './codes';

const r4 = JSON.parse(readFileSync(new URL('../../generated/r4.json', import.meta.url), 'utf8')) as {
  resourceTypes: string[];
  types: Record<string, { elements: Record<string, { binding?: string; types?: { code: string }[] }> }>;
};

describe('bindingsOf', () => {
  it('offers the top-level required bindings of a type, with the element type', () => {
    expect(bindingsOf('Patient')).toEqual([
      { element: 'gender', valueSet: 'http://hl7.org/fhir/ValueSet/administrative-gender', type: 'code' },
    ]);
    expect(bindingsOf('Condition')).toEqual([
      {
        element: 'clinicalStatus',
        valueSet: 'http://hl7.org/fhir/ValueSet/condition-clinical',
        type: 'CodeableConcept',
      },
      {
        element: 'verificationStatus',
        valueSet: 'http://hl7.org/fhir/ValueSet/condition-ver-status',
        type: 'CodeableConcept',
      },
    ]);
    expect(bindingsOf('NoSuchType')).toEqual([]);
  });

  it('holds every top-level required binding of the R4 definitions and nothing else', () => {
    for (const type of r4.resourceTypes) {
      const expected = Object.entries(r4.types[type].elements)
        .filter(([name, e]) => !name.includes('.') && e.binding)
        .map(([name, e]) => ({ element: name, valueSet: e.binding, type: e.types?.[0].code }));
      expect(bindingsOf(type), type).toEqual(expected);
    }
  });
});

describe('expandPath', () => {
  it('asks $expand for the url, the filter when there is one, and a page of codes', () => {
    const path = expandPath(' http://hl7.org/fhir/ValueSet/administrative-gender ', ' fem ');
    const url = new URL(path, 'http://x');
    expect(url.pathname).toBe('/fhir/ValueSet/$expand');
    expect([...url.searchParams]).toEqual([
      ['url', 'http://hl7.org/fhir/ValueSet/administrative-gender'],
      ['filter', 'fem'],
      ['count', '50'],
    ]);
    expect(new URL(expandPath('http://a/vs|1.0', '  ', 10), 'http://x').search).toBe(
      '?url=http%3A%2F%2Fa%2Fvs%7C1.0&count=10',
    );
  });
});

describe('insertionFor', () => {
  const female = { system: 'http://hl7.org/fhir/administrative-gender', code: 'female', display: 'Female' };
  const active = {
    system: 'http://terminology.hl7.org/CodeSystem/condition-clinical',
    code: 'active',
    display: 'Active',
  };

  it('writes a plain code for a value set bound to a code element of the type', () => {
    expect(insertionFor('Patient', 'http://hl7.org/fhir/ValueSet/administrative-gender', female)).toBe('"female"');
    // With a version, the same binding.
    expect(insertionFor('Patient', 'http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1', female)).toBe(
      '"female"',
    );
  });

  it('writes a CodeableConcept for a value set bound to one', () => {
    expect(insertionFor('Condition', 'http://hl7.org/fhir/ValueSet/condition-clinical', active)).toBe(
      '{ "coding": [ { "system": "http://terminology.hl7.org/CodeSystem/condition-clinical", "code": "active", "display": "Active" } ] }',
    );
  });

  it('writes a Coding for a value set the type does not bind at its top level', () => {
    // Observation has no top-level element bound to it (nor does any type to a value set typed in).
    expect(insertionFor('Observation', 'http://hl7.org/fhir/ValueSet/administrative-gender', female)).toBe(
      '{ "system": "http://hl7.org/fhir/administrative-gender", "code": "female", "display": "Female" }',
    );
    expect(JSON.parse(insertionFor('Patient', 'http://example.org/vs', { system: 'urn:s', code: 'a"b' }))).toEqual({
      system: 'urn:s',
      code: 'a"b',
    });
  });
});

describe('insertAt', () => {
  it('puts the text in place of the selection and the caret after it', () => {
    const text = '{"resourceType": "Patient", "gender": }';
    const at = text.lastIndexOf('}');
    expect(insertAt(text, at, at, '"female"')).toEqual({
      text: '{"resourceType": "Patient", "gender": "female"}',
      caret: at + '"female"'.length,
    });
    const replaced = insertAt('{"gender": "male"}', 11, 17, '"female"');
    expect(replaced).toEqual({ text: '{"gender": "female"}', caret: 19 });
  });
});
