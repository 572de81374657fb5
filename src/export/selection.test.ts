import { describe, expect, it } from 'vitest';
import { spId } from '../search/catalog.js';
import { postgresDialect, sqliteDialect } from '../storage/sql/dialect.js';
import { filterCondition, GROUP_DRIVE_LIMIT, levelCondition } from './selection.js';
import type { ExportSpec } from './selection.js';

const spec = (level: ExportSpec['level']): ExportSpec => ({ level, groupPk: 7, types: [], typeFilters: [] });

describe('levelCondition', () => {
  it('selects everything at the system level, and every Patient at the Patient level', () => {
    expect(levelCondition(sqliteDialect, spec('system'), 'Observation', [1])).toBeUndefined();
    expect(levelCondition(sqliteDialect, spec('patient'), 'Patient', [])).toBeUndefined();
  });

  it('probes the row’s own reference index rows for the compartment parameters, through (pk, sp)', () => {
    const condition = levelCondition(sqliteDialect, spec('patient'), 'Observation', [11, 12])!;
    expect(condition.text).toBe(
      'EXISTS (SELECT 1 FROM idx_reference t WHERE t.pk = r0.pk AND +t.sp IN (?, ?) AND t.target_type = ?)',
    );
    expect(condition.params).toEqual([11, 12, 'Patient']);
    expect(levelCondition(postgresDialect, spec('patient'), 'Observation', [11])!.text).toBe(
      'EXISTS (SELECT 1 FROM idx_reference t WHERE t.pk = r0.pk AND (t.sp + 0) IN (?) AND t.target_type = ? OFFSET 0)',
    );
  });

  it("limits a Group export to its members' rows, and a type outside the compartment to nothing", () => {
    const patients = levelCondition(sqliteDialect, spec('group'), 'Patient', [])!;
    expect(patients.text).toBe(
      'r0.id IN (SELECT g.target_id FROM idx_reference g WHERE g.pk = ? AND +g.sp = ? AND g.target_type = ?)',
    );
    expect(patients.params).toEqual([7, spId('Group', 'member'), 'Patient']);
    const observations = levelCondition(sqliteDialect, spec('group'), 'Observation', [11])!;
    expect(observations.text).toContain('AND t.target_id IN (SELECT g.target_id FROM idx_reference g WHERE g.pk = ?');
    expect(levelCondition(sqliteDialect, spec('patient'), 'Organization', [])!.text).toBe('1=0');
  });

  it("reads a small Group's compartments from its members, a large one's by probing each row", () => {
    const group = (groupMembers: number): ExportSpec => ({ ...spec('group'), groupMembers });
    const driven = levelCondition(sqliteDialect, group(GROUP_DRIVE_LIMIT), 'Observation', [11, 12])!;
    expect(driven.text).toBe(
      'r0.pk IN (SELECT t.pk FROM idx_reference t WHERE t.sp IN (?, ?) AND t.target_type = ? AND t.target_id IN (SELECT g.target_id FROM idx_reference g WHERE g.pk = ? AND +g.sp = ? AND g.target_type = ?))',
    );
    expect(driven.params).toEqual([11, 12, 'Patient', 7, spId('Group', 'member'), 'Patient']);
    const probed = levelCondition(sqliteDialect, group(GROUP_DRIVE_LIMIT + 1), 'Observation', [11])!;
    expect(probed.text).toMatch(/^EXISTS \(SELECT 1 FROM idx_reference t WHERE t.pk = r0.pk /);
    // A job stored before the count was kept walks, as it did.
    expect(levelCondition(sqliteDialect, spec('group'), 'Observation', [11])!.text).toMatch(/^EXISTS /);
    // The Patients themselves are the members either way.
    expect(levelCondition(sqliteDialect, group(2), 'Patient', [])!.text).toMatch(/^r0.id IN /);
  });
});

describe('filterCondition', () => {
  it('is undefined without filters, and ORs filters of ANDed criteria', () => {
    expect(filterCondition(sqliteDialect, [])).toBeUndefined();
    const id = (ids: string[]) => ({ kind: 'id' as const, ids, selectivity: 0 });
    const condition = filterCondition(sqliteDialect, [[id(['a']), id(['b'])], [id(['c'])]])!;
    expect(condition.text).toBe('((r0.id = ? AND r0.id = ?) OR r0.id = ?)');
    expect(condition.params).toEqual(['a', 'b', 'c']);
  });
});
