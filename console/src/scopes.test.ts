import { describe, expect, it } from 'vitest';
import { may, searchableTypes } from './scopes';

describe('scopes', () => {
  it('reads SMART v2 letters and the v1 forms, per type and for every type', () => {
    expect(may(['system/*.cruds'], 'Patient', 'd')).toBe(true);
    expect(may(['system/Patient.rs'], 'Patient', 's')).toBe(true);
    expect(may(['system/Patient.rs'], 'Patient', 'u')).toBe(false);
    expect(may(['system/Patient.rs'], 'Observation', 's')).toBe(false);
    expect(may(['system/Patient.read'], 'Patient', 's')).toBe(true);
    expect(may(['system/Patient.write'], 'Patient', 's')).toBe(false);
    expect(may(['system/Patient.write'], 'Patient', 'c')).toBe(true);
    expect(may(['system/*.*'], 'Observation', 'u')).toBe(true);
    expect(may(['scribe.read', 'system/Patient.sr'], 'Patient', 's')).toBe(false);
  });

  it('lists the searchable types in the given order', () => {
    expect(
      searchableTypes(['system/Patient.rs', 'system/Encounter.c'], ['Encounter', 'Observation', 'Patient']),
    ).toEqual(['Patient']);
  });
});
