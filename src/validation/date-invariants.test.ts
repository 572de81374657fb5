import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { validateResource } from './validate.js';

// per-1, mdd-1 and inv-1 compare dates: as instants, time zones included, never as text.
describe('invariants that compare dates', () => {
  const registry = loadR4Definitions();
  const encounter = (start: string, end: string) => ({
    resourceType: 'Encounter',
    status: 'finished',
    class: { code: 'AMB' },
    period: { start, end },
  });
  const per1 = (start: string, end: string) =>
    validateResource(encounter(start, end), registry).filter((i) => i.diagnostics.includes('per-1'));

  it('accepts a period that ends later in another time zone (a DST change)', () => {
    expect(per1('2022-11-06T01:52:06-04:00', '2022-11-06T01:07:06-05:00')).toEqual([]);
  });

  it('refuses a period that ends before it starts, whatever the text says', () => {
    expect(per1('2022-11-06T05:52:06Z', '2022-11-06T01:07:06-05:00')).toEqual([]);
    expect(per1('2022-11-06T07:00:00Z', '2022-11-06T01:07:06-05:00')).toEqual([
      expect.objectContaining({ expression: 'Encounter.period', rule: 'invariant' }),
    ]);
  });

  it('refuses a Task modified before it was authored', () => {
    const issues = validateResource(
      {
        resourceType: 'Task',
        status: 'draft',
        intent: 'order',
        authoredOn: '2024-01-02T10:00:00+02:00',
        lastModified: '2024-01-02T07:30:00Z',
      },
      registry,
    );
    expect(issues.map((i) => i.diagnostics).join(' ')).toContain('inv-1');
  });
});

describe('control characters', () => {
  const registry = loadR4Definitions();
  it('refuses NUL and other C0 controls in strings, but keeps tabs and line breaks', () => {
    const issues = (family: string) =>
      validateResource({ resourceType: 'Patient', name: [{ family }] }, registry).filter((i) => i.severity === 'error');
    expect(issues('Do\u0000e')).toEqual([
      expect.objectContaining({ expression: 'Patient.name[0].family', code: 'value' }),
    ]);
    expect(issues('Do\u0007e')).toHaveLength(1);
    expect(issues('Do\te\r\nSmith')).toEqual([]);
  });
});
