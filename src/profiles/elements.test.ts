import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { MAX_PROFILE_ELEMENTS, mergeDifferential, readElements } from './elements.js';
import { deepEqual, matchesPattern } from './conformance.js';

describe('readElements', () => {
  it('gives each element the id of its path and slices, whatever ids the list carries', () => {
    const elements = readElements(
      [
        { path: 'Observation' },
        { path: 'Observation.component', slicing: { discriminator: [{ type: 'pattern', path: 'code' }] } },
        { path: 'Observation.component', sliceName: 'systolic', min: 1, id: 'wrong' },
        { path: 'Observation.component.code', patternCodeableConcept: { text: 's' } },
        { path: 'Observation.component', sliceName: 'diastolic' },
        { path: 'Observation.component.code' },
        { path: 'Observation.status', fixedCode: 'final' },
      ],
      'd',
      'Observation',
    );
    expect(elements.map((e) => e.id)).toEqual([
      'Observation',
      'Observation.component',
      'Observation.component:systolic',
      'Observation.component:systolic.code',
      'Observation.component:diastolic',
      'Observation.component:diastolic.code',
      'Observation.status',
    ]);
    expect(elements[3].pattern).toEqual({ name: 'patternCodeableConcept', value: { text: 's' } });
    expect(elements[6].fixed).toEqual({ name: 'fixedCode', value: 'final' });
  });

  it('refuses paths of another type, bad slice names and maxima, and more than the element bound', () => {
    const refusal = (list: unknown) => {
      try {
        readElements(list, 'd', 'Patient');
      } catch (error) {
        expect(error).toBeInstanceOf(AppError);
        return (error as AppError).message;
      }
      throw new Error('not refused');
    };
    expect(refusal([{ path: 'Observation.code' }])).toContain('not an element of Patient');
    expect(refusal([{ path: 'Patient.name', sliceName: 'a.b' }])).toContain('sliceName');
    expect(refusal([{ path: 'Patient.name', max: 'many' }])).toContain('max');
    const many = Array.from({ length: MAX_PROFILE_ELEMENTS + 1 }, () => ({ path: 'Patient.name' }));
    expect(refusal(many)).toContain(`more than ${MAX_PROFILE_ELEMENTS} elements`);
  });
});

describe('mergeDifferential', () => {
  it('overrides the base element property by property, adds new ones, and keeps both sets of constraints', () => {
    const base = readElements(
      [
        {
          path: 'Patient.name',
          min: 1,
          max: '*',
          constraint: [{ key: 'a-1', severity: 'error', human: 'a', expression: 'true' }],
        },
        { path: 'Patient.birthDate', min: 1 },
      ],
      'b',
      'Patient',
    );
    const differential = readElements(
      [
        {
          path: 'Patient.name',
          max: '1',
          constraint: [{ key: 'b-1', severity: 'error', human: 'b', expression: 'true' }],
        },
        { path: 'Patient.gender', min: 1 },
      ],
      'd',
      'Patient',
    );
    const merged = mergeDifferential(base, differential);
    expect(merged.map((e) => [e.id, e.min, e.max])).toEqual([
      ['Patient.name', 1, '1'],
      ['Patient.birthDate', 1, undefined],
      ['Patient.gender', 1, undefined],
    ]);
    expect(merged[0].constraint?.map((c) => c.key)).toEqual(['a-1', 'b-1']);
  });
});

describe('fixed and pattern values', () => {
  it('fixed: exactly the value, nothing more', () => {
    expect(deepEqual({ system: 's', code: 'c' }, { code: 'c', system: 's' })).toBe(true);
    expect(deepEqual({ system: 's', code: 'c', display: 'd' }, { system: 's', code: 'c' })).toBe(false);
    expect(deepEqual(['a', 'b'], ['b', 'a'])).toBe(false);
  });

  it("pattern: what the pattern has, in any item of the value's arrays", () => {
    const concept = {
      coding: [
        { system: 'x', code: '1' },
        { system: 'http://loinc.org', code: '8480-6', display: 'S' },
      ],
      text: 't',
    };
    expect(matchesPattern(concept, { coding: [{ system: 'http://loinc.org', code: '8480-6' }] })).toBe(true);
    expect(matchesPattern(concept, { coding: [{ system: 'http://loinc.org', code: '8462-4' }] })).toBe(false);
    expect(matchesPattern(concept, { text: 'other' })).toBe(false);
    expect(matchesPattern('final', 'final')).toBe(true);
    expect(matchesPattern(1, '1')).toBe(false);
  });
});
