import { describe, expect, it } from 'vitest';
import { elementValue, formatValue, humanise, localReference } from './format';

describe('formatValue', () => {
  it.each([
    [[{ family: 'Chalmers', given: ['Peter', 'James'], prefix: ['Mr.'] }], 'Mr. Peter James Chalmers'],
    [{ text: 'Heart rate', coding: [{ code: '8867-4' }] }, 'Heart rate'],
    [{ coding: [{ code: '8867-4' }, { code: 'x', display: 'Heart rate' }] }, 'Heart rate'],
    [{ coding: [{ system: 'http://loinc.org', code: '8867-4' }] }, '8867-4'],
    [{ value: 72, unit: 'beats/minute', code: '/min' }, '72 beats/minute'],
    [{ value: 5, comparator: '<', code: 'mg' }, '< 5 mg'],
    [{ start: '2024-01-01', end: '2024-01-02' }, '2024-01-01 – 2024-01-02'],
    [{ start: '2024-01-01' }, '2024-01-01 – …'],
    [{ reference: 'Patient/1', display: 'Peter' }, 'Peter'],
    [{ reference: 'Patient/1' }, 'Patient/1'],
    [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB', display: 'ambulatory' }, 'ambulatory'],
    [[{ system: 'urn:x', value: 'A-1' }], 'A-1'],
    [{ line: ['1 Main St'], city: 'Springfield', postalCode: '12345' }, '1 Main St, Springfield, 12345'],
    [{ low: { value: 1, unit: 'mg' }, high: { value: 2, unit: 'mg' } }, '1 mg – 2 mg'],
    [true, 'true'],
    [undefined, ''],
  ])('%j → %s', (value, text) => expect(formatValue(value)).toBe(text));

  it('shows the first three of a list and counts the rest, and cuts long texts', () => {
    expect(formatValue(['a', 'b', 'c', 'd', 'e'])).toBe('a; b; c (+2)');
    expect(formatValue('x'.repeat(200))).toHaveLength(80);
  });
});

describe('elementValue', () => {
  it('finds a choice element by its name without [x], and not an element that merely starts alike', () => {
    expect(elementValue({ valueQuantity: { value: 1 } }, 'value')).toEqual({ value: 1 });
    expect(elementValue({ effectiveDateTime: '2024' }, 'effective')).toBe('2024');
    expect(elementValue({ valuesomething: 1 }, 'value')).toBeUndefined();
    expect(elementValue({ code: 1 }, 'code')).toBe(1);
  });
});

describe('localReference', () => {
  it('links relative references only', () => {
    expect(localReference('Patient/a.b-1')).toEqual({ type: 'Patient', id: 'a.b-1' });
    expect(localReference('Patient/1/_history/2')).toEqual({ type: 'Patient', id: '1' });
    expect(localReference('http://other.example/fhir/Patient/1')).toBeUndefined();
    expect(localReference('#contained')).toBeUndefined();
    expect(localReference('javascript:alert(1)')).toBeUndefined();
    expect(localReference(42)).toBeUndefined();
  });
});

it('humanises element names', () => {
  expect(humanise('birthDate')).toBe('Birth date');
  expect(humanise('status')).toBe('Status');
});
