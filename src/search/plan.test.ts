// Stage 2 alone: parsed requests against the registry, without a database.
import { describe, expect, it } from 'vitest';
import { sqliteDialect } from '../storage/sql/dialect.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { createSearchCatalog } from './engine.js';
import { parseSearch } from './parse.js';
import { planSearch } from './plan.js';
import type { PlanContext } from './plan.js';

const registry = loadR4Definitions();
const catalog = createSearchCatalog(registry, 'https://fhir.example/fhir');

function plan(types: string[], query: string, options: Partial<PlanContext> = {}) {
  return planSearch(parseSearch([...new URLSearchParams(query)]), types, {
    catalog,
    references: catalog.references,
    now: Date.UTC(2025, 0, 1),
    strict: false,
    canSearch: () => true,
    dialect: sqliteDialect,
    ...options,
  });
}

function status(fn: () => unknown): number {
  try {
    fn();
    return 200;
  } catch (error) {
    return error instanceof AppError ? error.status : 500;
  }
}

describe('planning', () => {
  it('resolves parameters to index rows and picks the selective ones as drivers', () => {
    const p = plan(['Patient'], 'name=smith&gender=female&identifier=s|v');
    expect(p.criteria.map((c) => [c.kind, c.selectivity])).toEqual([
      ['rows', 2],
      ['rows', 4],
      ['rows', 1],
    ]);
  });

  it('resolves chains to the targets that have the chained parameter', () => {
    const p = plan(['Observation'], 'subject.name=smith');
    expect(p.criteria[0]).toMatchObject({ kind: 'chain' });
    expect([...(p.criteria[0] as { targetTypes: readonly string[] }).targetTypes].sort()).toEqual([
      'Location',
      'Patient',
    ]);
    const typed = plan(['Observation'], 'subject:Patient.name=smith');
    expect(typed.criteria[0]).toMatchObject({ kind: 'chain', targetTypes: ['Patient'] });
  });

  it('collects unknown and unsupported parameters, leaving them out of the links', () => {
    const p = plan(['Patient'], 'foo=1&_text=x&name=smith&_sort=name');
    expect(p.ignored.map((i) => i.name)).toEqual(['foo', '_text']);
    expect(p.linkParams).toEqual([
      ['name', 'smith'],
      ['_sort', 'name'],
    ]);
    expect(status(() => plan(['Patient'], 'foo=1', { strict: true }))).toBe(400);
  });

  it('refuses an unknown _sort parameter (400), even without handling=strict', () => {
    expect(status(() => plan(['Patient'], '_sort=bar,name'))).toBe(400);
    expect(status(() => plan(['Patient'], '_sort=-_text'))).toBe(400);
  });

  it.each([
    ['Patient', 'name:below=x'],
    ['Patient', 'gender:exact=x'],
    ['Patient', 'gender:above=x'],
    ['Patient', 'birthdate=2020-13-01'],
    ['Patient', 'birthdate:missing=yes'],
    ['Patient', '_id:exact=1'],
    ['Observation', 'subject:Practitioner=1'],
    ['Observation', 'code.name=x'],
    ['Observation', 'code-value-quantity=a'],
    ['Patient', '_has:Observation:code:code=x'],
    ['Observation', '_sort=code-value-quantity'],
    ['Patient', '_include=Patient:name'],
  ])('refuses %s?%s with 400', (type, query) => {
    expect(status(() => plan([type], query))).toBe(400);
  });

  it('refuses with 403 a chain, _has or include through a type the caller may not search', () => {
    const canSearch = (t: string) => t === 'Patient';
    expect(status(() => plan(['Patient'], 'name=x', { canSearch }))).toBe(200);
    expect(status(() => plan(['Patient'], 'general-practitioner:Practitioner.name=x', { canSearch }))).toBe(403);
    expect(status(() => plan(['Patient'], '_has:Observation:patient:code=x', { canSearch }))).toBe(403);
    expect(status(() => plan(['Patient'], '_include=Patient:organization', { canSearch }))).toBe(403);
    expect(status(() => plan(['Patient'], '_revinclude=Observation:patient', { canSearch }))).toBe(403);
  });

  it('includes only the types the parameters name, each one the caller may search', () => {
    const canSearch = (t: string) => t === 'Task' || t === 'Encounter';
    // Task.partOf refers to Tasks only: whatever a stored reference says, only Tasks come back.
    expect(plan(['Task'], '_include=Task:part-of', { canSearch }).includes[0].returnedTypes).toEqual(['Task']);
    expect(plan(['Task'], '_revinclude:iterate=Task:part-of', { canSearch }).includes[0].returnedTypes).toEqual([
      'Task',
    ]);
    expect(plan(['Encounter'], '_include=Encounter:part-of', { canSearch }).includes[0].returnedTypes).toEqual([
      'Encounter',
    ]);
    // A parameter that declares no targets refers to any type: the ones the caller may search.
    const anyTarget = plan(['RequestGroup'], '_include=RequestGroup:instantiates-canonical', {
      canSearch: (t) => t === 'RequestGroup' || t === 'Task',
    });
    expect(anyTarget.includes[0].returnedTypes).toEqual(['RequestGroup', 'Task']);
  });

  it('plans a system search with the parameters every type has', () => {
    const p = plan(['Patient', 'Practitioner'], 'name=x&_tag=t');
    expect(p.criteria).toHaveLength(2);
    expect(p.criteria[0]).toMatchObject({ kind: 'rows', sps: expect.any(Array) });
    expect((p.criteria[0] as { sps: readonly number[] }).sps).toHaveLength(2);
    expect(plan(['Patient', 'Observation'], 'name=x').ignored).toHaveLength(1);
  });
});
