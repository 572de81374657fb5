import { describe, expect, it } from 'vitest';
import { fhirPathCopies, forFhirPath } from './fhirpath-copies.js';

describe('fhirPathCopies', () => {
  it('copies nothing when the engine cannot write into the input (the common case)', () => {
    const patient = { resourceType: 'Patient', name: [{ given: ['a'], _given: [{ id: 'g' }] }], _gender: { id: 'x' } };
    expect(fhirPathCopies(patient)).toBeUndefined();
    expect(forFhirPath(patient, undefined)).toBe(patient);
  });

  it('copies an object held by a primitive beside its sibling, and the path to it, sharing the rest', () => {
    const untouched = { family: 'F' };
    const start = { a: 1 };
    const period = { start, _start: { id: 's' } };
    const patient = { resourceType: 'Patient', name: [untouched, { period }] };
    const copies = fhirPathCopies(patient)!;
    const copy = forFhirPath(patient, copies);
    expect(copy).toEqual(patient);
    expect(copy).not.toBe(patient);
    expect(copy.name[0]).toBe(untouched);
    const periodCopy = forFhirPath(period, copies);
    expect(periodCopy).not.toBe(period);
    expect(periodCopy.start).not.toBe(start);
    expect(copy.name[1]).toEqual({ period: periodCopy });
    expect((copy.name[1] as { period: unknown }).period).toBe(periodCopy);
  });

  it('copies a sibling (or sibling item) that has its own __proto__ or constructor member', () => {
    const quantity = JSON.parse('{"code":"mg","_code":{"__proto__":{"p":1},"constructor":"c"}}');
    const copy = forFhirPath(quantity, fhirPathCopies(quantity));
    expect(Object.keys(copy._code)).toEqual(['__proto__', 'constructor']);
    expect(copy._code).not.toBe(quantity._code);
    const name = JSON.parse('{"given":["a","b"],"_given":[{"id":"x"},{"constructor":"c"}]}');
    const named = forFhirPath(name, fhirPathCopies(name));
    expect(named._given[0]).toBe(name._given[0]);
    expect(named._given[1]).not.toBe(name._given[1]);
    expect(named).toEqual(name);
  });
});
