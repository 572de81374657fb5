import { describe, expect, it } from 'vitest';
import { columnsFor, RESOURCE_TYPES } from './columns';

describe('columns', () => {
  it('knows every R4 resource type', () => {
    expect(RESOURCE_TYPES).toHaveLength(146);
    expect(RESOURCE_TYPES).toContain('Patient');
  });

  it('gives Patient, Observation and Encounter the columns a person expects', () => {
    expect(columnsFor('Patient').map((c) => c.header)).toEqual(['Name', 'Gender', 'Birth date', 'Identifier']);
    expect(columnsFor('Observation').map((c) => c.header)).toEqual(['Code', 'Value', 'Date', 'Subject']);
    expect(columnsFor('Encounter').map((c) => c.header)).toEqual(['Class', 'Period', 'Subject']);
  });

  it('gives other types four of their summary elements, what says what the resource is first', () => {
    expect(columnsFor('Condition').map((c) => c.elements[0])).toEqual(['code', 'clinicalStatus', 'subject', 'onset']);
    expect(columnsFor('MedicationRequest').map((c) => c.elements[0])).toEqual([
      'medication',
      'status',
      'intent',
      'subject',
    ]);
    for (const type of RESOURCE_TYPES) {
      const columns = columnsFor(type);
      expect(columns.length, type).toBeLessThanOrEqual(4);
      expect(
        columns.map((c) => c.elements[0]),
        type,
      ).not.toContain('meta');
    }
  });
});
