import { describe, expect, it } from 'vitest';
import { outOfBound, spanOf } from './value-bounds.js';

const UCUM = 'http://unitsofmeasure.org';

describe('outOfBound', () => {
  it('compares numbers and times of day', () => {
    expect(outOfBound(-1, { name: 'minValueInteger', value: 0 }, 'min')).toBe(true);
    expect(outOfBound(0, { name: 'minValueInteger', value: 0 }, 'min')).toBe(false);
    expect(outOfBound(2.5, { name: 'maxValueDecimal', value: 2.4 }, 'max')).toBe(true);
    expect(outOfBound('00:30:00', { name: 'minValueTime', value: '01:00:00' }, 'min')).toBe(true);
    expect(outOfBound('14:12:00', { name: 'maxValueTime', value: '03:00:00' }, 'max')).toBe(true);
    expect(outOfBound('02:15:00', { name: 'maxValueTime', value: '03:00:00' }, 'max')).toBe(false);
  });

  it('refuses a date only when all of its span is beyond the bound', () => {
    const min = { name: 'minValueDate', value: '2025-01-01' };
    expect(outOfBound('2024-01-01', min, 'min')).toBe(true);
    expect(outOfBound('2024', min, 'min')).toBe(true);
    expect(outOfBound('2025', min, 'min')).toBe(false);
    // 2024-12-31T23:00Z: the bound's day is read in UTC.
    expect(outOfBound('2025-01-01T00:00:00+01:00', min, 'min')).toBe(true);
    expect(outOfBound('2025-01-01T00:00:00-01:00', min, 'min')).toBe(false);
    const max = { name: 'maxValueDateTime', value: '2020-06' };
    expect(outOfBound('2020-06-30T23:59:59Z', max, 'max')).toBe(false);
    expect(outOfBound('2020-07-01', max, 'max')).toBe(true);
  });

  it('compares UCUM quantities in their canonical units, others only in the same unit', () => {
    const max = { name: 'maxValueQuantity', value: { value: 0, system: UCUM, code: 'kg' } };
    expect(outOfBound({ value: 11000, system: UCUM, code: 'g' }, max, 'max')).toBe(true);
    expect(outOfBound({ value: -1, system: UCUM, code: 'g' }, max, 'max')).toBe(false);
    const min = { name: 'minValueQuantity', value: { value: 1, system: UCUM, code: 'kg' } };
    expect(outOfBound({ value: 999, system: UCUM, code: 'g' }, min, 'min')).toBe(true);
    expect(outOfBound({ value: 1000, system: UCUM, code: 'g' }, min, 'min')).toBe(false);
    expect(outOfBound({ value: 0, system: UCUM, code: 'm' }, min, 'min')).toBe(false); // not commensurable
    const local = { name: 'minValueQuantity', value: { value: 5, system: 'urn:units', code: 'box' } };
    expect(outOfBound({ value: 4, system: 'urn:units', code: 'box' }, local, 'min')).toBe(true);
    expect(outOfBound({ value: 4, system: 'urn:units', code: 'crate' }, local, 'min')).toBe(false);
  });

  it('does not refuse what it cannot compare', () => {
    expect(outOfBound('5', { name: 'minValueInteger', value: 10 }, 'min')).toBe(false);
    expect(outOfBound('not a date', { name: 'minValueDate', value: '2000' }, 'min')).toBe(false);
    expect(outOfBound(1, { name: 'minValueSomething', value: 10 }, 'min')).toBe(false);
  });
});

describe('spanOf', () => {
  it('gives the first and last millisecond of each precision, zones applied', () => {
    expect(spanOf('2024')).toEqual({ first: Date.UTC(2024, 0, 1), last: Date.UTC(2025, 0, 1) - 1 });
    expect(spanOf('2024-02')).toEqual({ first: Date.UTC(2024, 1, 1), last: Date.UTC(2024, 2, 1) - 1 });
    expect(spanOf('2024-02-29')).toEqual({ first: Date.UTC(2024, 1, 29), last: Date.UTC(2024, 2, 1) - 1 });
    expect(spanOf('2024-02-29T10:00:00+02:00')).toEqual({
      first: Date.UTC(2024, 1, 29, 8),
      last: Date.UTC(2024, 1, 29, 8, 0, 1) - 1,
    });
    expect(spanOf('2024-02-29T10:00:00.250Z')).toEqual({
      first: Date.UTC(2024, 1, 29, 10, 0, 0, 250),
      last: Date.UTC(2024, 1, 29, 10, 0, 0, 250),
    });
    expect(spanOf('yesterday')).toBeUndefined();
  });
});
