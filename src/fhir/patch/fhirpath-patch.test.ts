import { describe, expect, it } from 'vitest';
import { applyFhirPathPatch } from './fhirpath-patch.js';

type Part = Record<string, unknown>;
const operation = (...parts: Part[]) => ({ name: 'operation', part: parts });
const patch = (...operations: ReturnType<typeof operation>[]) => ({
  resourceType: 'Parameters',
  parameter: operations,
});
const type = (code: string) => ({ name: 'type', valueCode: code });
const path = (p: string) => ({ name: 'path', valueString: p });

const patient = () => ({
  resourceType: 'Patient',
  id: 'p1',
  identifier: [
    { system: 'http://a', value: '1' },
    { system: 'http://b', value: '2' },
  ],
  name: [{ family: 'Doe', given: ['Jane', 'Q'] }],
  birthDate: '1970-01-01',
  active: true,
});

describe('applyFhirPathPatch (https://hl7.org/fhir/R4/fhirpatch.html)', () => {
  it('adds a primitive and a complex value built from parts', () => {
    const result = applyFhirPathPatch(
      patient(),
      patch(
        operation(
          type('add'),
          path('Patient'),
          { name: 'name', valueString: 'gender' },
          { name: 'value', valueCode: 'female' },
        ),
        operation(
          type('add'),
          path('Patient'),
          { name: 'name', valueString: 'telecom' },
          {
            name: 'value',
            part: [
              { name: 'system', valueCode: 'phone' },
              { name: 'value', valueString: '555' },
            ],
          },
        ),
      ),
    ) as Record<string, unknown>;
    expect(result.gender).toBe('female');
    expect(result.telecom).toEqual({ system: 'phone', value: '555' });
  });

  it('appends with add to a repeating element that exists', () => {
    const result = applyFhirPathPatch(
      patient(),
      patch(
        operation(
          type('add'),
          path('Patient.name[0]'),
          { name: 'name', valueString: 'given' },
          { name: 'value', valueString: 'Ann' },
        ),
      ),
    );
    expect(result.name[0].given).toEqual(['Jane', 'Q', 'Ann']);
  });

  it('inserts at an index and moves within a list', () => {
    const inserted = applyFhirPathPatch(
      patient(),
      patch(
        operation(
          type('insert'),
          path('Patient.identifier'),
          { name: 'index', valueInteger: 0 },
          {
            name: 'value',
            valueIdentifier: { system: 'http://c', value: '0' },
          },
        ),
        operation(
          type('move'),
          path('Patient.identifier'),
          { name: 'source', valueInteger: 0 },
          { name: 'destination', valueInteger: 2 },
        ),
      ),
    );
    expect(inserted.identifier.map((i) => i.system)).toEqual(['http://a', 'http://b', 'http://c']);
  });

  it('replaces and deletes objects and primitives found by where()', () => {
    const result = applyFhirPathPatch(
      patient(),
      patch(
        operation(type('replace'), path("Patient.identifier.where(system='http://b').value"), {
          name: 'value',
          valueString: '22',
        }),
        operation(type('delete'), path("Patient.identifier.where(system='http://a')")),
        operation(type('delete'), path('Patient.name.given[1]')),
        operation(type('replace'), path('Patient.birthDate'), { name: 'value', valueDate: '1971-02-03' }),
        operation(type('delete'), path('Patient.active')),
        operation(type('delete'), path('Patient.deceased')),
      ),
    ) as Record<string, any>;
    expect(result.identifier).toEqual([{ system: 'http://b', value: '22' }]);
    expect(result.name[0].given).toEqual(['Jane']);
    expect(result.birthDate).toBe('1971-02-03');
    expect(result.active).toBeUndefined();
  });

  it('leaves the input untouched', () => {
    const input = patient();
    applyFhirPathPatch(input, patch(operation(type('delete'), path('Patient.name'))));
    expect(input.name).toHaveLength(1);
  });

  it.each([
    ['not Parameters', { resourceType: 'Patient' }, 'bad-request'],
    ['an unknown type', patch(operation(type('copy'), path('Patient'))), 'bad-request'],
    [
      'add without name',
      patch(operation(type('add'), path('Patient'), { name: 'value', valueString: 'x' })),
      'bad-request',
    ],
    [
      'replace of nothing',
      patch(operation(type('replace'), path('Patient.gender'), { name: 'value', valueCode: 'male' })),
      'patch-failed',
    ],
    [
      'replace of many',
      patch(operation(type('replace'), path('Patient.identifier'), { name: 'value', valueString: 'x' })),
      'patch-failed',
    ],
    [
      'an out-of-range insert',
      patch(
        operation(
          type('insert'),
          path('Patient.identifier'),
          { name: 'index', valueInteger: 9 },
          { name: 'value', valueString: 'x' },
        ),
      ),
      'patch-failed',
    ],
    ['a syntax error', patch(operation(type('delete'), path('Patient.name.where(('))), 'bad-request'],
  ])('refuses %s', (_name, body, code) => {
    expect(() => applyFhirPathPatch(patient(), body)).toThrow(expect.objectContaining({ code }));
  });
});
