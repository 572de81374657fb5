// Compartments and $everything, planned without a database: the R4 CompartmentDefinitions as compiled
// by the build, the types a compartment search reads, its criterion, and $everything's parameters and plan.
import { describe, expect, it } from 'vitest';
import { compileCompartments } from '../definitions/build-r4.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { sqliteDialect } from '../storage/sql/dialect.js';
import { spId } from './catalog.js';
import { compartmentCriterion, compartmentSearchTypes, memberTypes } from './compartment.js';
import { createSearchCatalog } from './engine.js';
import { everythingTypes, parseEverything, planEverything } from './everything.js';

const registry = loadR4Definitions();
const catalog = createSearchCatalog(registry, 'https://fhir.example/fhir');
const patient = registry.compartment('Patient')!;

function failure(fn: () => unknown): { status: number; message: string } | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    return { status: error.status, message: error.message };
  }
}

describe('the R4 CompartmentDefinitions, compiled at build time', () => {
  it('has the five compartments with the members and parameters R4 gives them', () => {
    expect(registry.compartments.map((c) => c.code).sort()).toEqual([
      'Device',
      'Encounter',
      'Patient',
      'Practitioner',
      'RelatedPerson',
    ]);
    expect(patient.url).toBe('http://hl7.org/fhir/CompartmentDefinition/patient');
    expect(memberTypes(patient)).toHaveLength(66);
    expect(patient.members.Observation).toEqual({ params: ['subject', 'performer'], self: false });
    expect(patient.members.Patient).toEqual({ params: ['link'], self: true });
    expect(patient.members.Practitioner).toBeUndefined();
    expect(registry.compartment('Encounter')!.members.Encounter).toEqual({ params: [], self: true });
    expect(registry.compartment('Practitioner')!.members.Observation).toEqual({ params: ['performer'], self: false });
    expect(registry.compartment('Organization')).toBeUndefined();
  });

  it('keeps `{def}` as the resource itself, drops types without parameters, refuses an unknown parameter', () => {
    const search = { Encounter: [], Observation: [{ code: 'encounter', type: 'reference' as const, url: 'u' }] };
    const definition = {
      resourceType: 'CompartmentDefinition',
      url: 'http://example.org/c',
      code: 'Encounter',
      resource: [
        { code: 'Encounter', param: ['{def}'] },
        { code: 'Observation', param: ['encounter'] },
        { code: 'Flag' },
      ],
    };
    expect(compileCompartments([definition], search)).toEqual({
      Encounter: {
        code: 'Encounter',
        url: 'http://example.org/c',
        members: { Encounter: { params: [], self: true }, Observation: { params: ['encounter'], self: false } },
      },
    });
    const broken = { ...definition, resource: [{ code: 'Observation', param: ['nonsense'] }] };
    expect(() => compileCompartments([broken], search)).toThrow(/Observation.nonsense is not a reference/);
  });
});

describe('compartment search planning', () => {
  const all = () => true;

  it('reads a named member type, or with `*` every member the caller may search', () => {
    expect(compartmentSearchTypes(patient, 'Observation', undefined, all)).toEqual(['Observation']);
    expect(compartmentSearchTypes(patient, '*', undefined, all)).toEqual(memberTypes(patient));
    expect(compartmentSearchTypes(patient, '*', undefined, (t) => t === 'Condition' || t === 'Practitioner')).toEqual([
      'Condition',
    ]);
    expect(compartmentSearchTypes(patient, '*', ['Observation', 'Condition', 'Observation'], all)).toEqual([
      'Condition',
      'Observation',
    ]);
  });

  it('refuses a non-member (400), a type the caller may not search (403), and `*` with nothing allowed (403)', () => {
    expect(failure(() => compartmentSearchTypes(patient, 'Practitioner', undefined, all))?.status).toBe(400);
    expect(failure(() => compartmentSearchTypes(patient, '*', ['Medication'], all))?.status).toBe(400);
    expect(failure(() => compartmentSearchTypes(patient, 'Observation', ['Condition'], all))?.status).toBe(400);
    expect(failure(() => compartmentSearchTypes(patient, 'Condition', undefined, (t) => t !== 'Condition'))).toEqual({
      status: 403,
      message: expect.stringContaining('system/Condition.s'),
    });
    expect(failure(() => compartmentSearchTypes(patient, '*', ['Condition'], () => false))?.status).toBe(403);
    expect(failure(() => compartmentSearchTypes(patient, '*', undefined, () => false))?.status).toBe(403);
  });

  it('is an OR across the member types’ parameters, and the compartment’s own resource for its type', () => {
    expect(compartmentCriterion(patient, 'p1', ['Observation', 'Condition'])).toEqual({
      kind: 'compartment',
      compartmentType: 'Patient',
      id: 'p1',
      refSps: [
        spId('Observation', 'subject'),
        spId('Observation', 'performer'),
        spId('Condition', 'patient'),
        spId('Condition', 'asserter'),
      ],
      selfType: undefined,
      selectivity: 1,
    });
    const own = compartmentCriterion(registry.compartment('Encounter')!, 'e1', ['Encounter']);
    expect(own).toMatchObject({ refSps: [], selfType: 'Encounter' });
    expect(compartmentCriterion(patient, 'p1', ['Patient'])).toMatchObject({
      refSps: [spId('Patient', 'link')],
      selfType: 'Patient',
    });
  });
});

describe('$everything', () => {
  it('parses its five parameters, keeping them for the links', () => {
    const request = parseEverything([
      ['start', '2020-01-01'],
      ['_type', 'Observation,Condition'],
      ['_format', 'json'],
      ['_count', '5000'],
      ['_cursor', 'abc.def'],
    ]);
    expect(request).toEqual({
      start: '2020-01-01',
      end: undefined,
      since: undefined,
      types: ['Observation', 'Condition'],
      count: 1000,
      cursor: 'abc.def',
      linkParams: [
        ['start', '2020-01-01'],
        ['_type', 'Observation,Condition'],
        ['_count', '5000'],
      ],
    });
    expect(parseEverything([]).count).toBe(20);
  });

  it('refuses other parameters, bad dates and repeats (400)', () => {
    for (const params of [
      [['code', 'x']],
      [['start', 'soon']],
      [['end', '2020-02-30T']],
      [
        ['_since', '2020-01-01'],
        ['_since', '2021-01-01'],
      ],
      [['_type', ',']],
      [['_count', '-1']],
    ] as [string, string][][]) {
      expect(failure(() => parseEverything(params))?.status, JSON.stringify(params)).toBe(400);
    }
  });

  it('returns the Patient compartment’s types the caller may read, narrowed by _type', () => {
    const readable = (t: string) => ['Patient', 'Observation', 'Practitioner'].includes(t);
    expect(everythingTypes(registry, patient, undefined, readable)).toEqual(['Observation', 'Patient']);
    expect(everythingTypes(registry, patient, ['Observation'], readable)).toEqual(['Observation']);
    expect(failure(() => everythingTypes(registry, patient, ['Nope'], readable))?.status).toBe(400);
    expect(failure(() => everythingTypes(registry, patient, ['Practitioner'], readable))?.status).toBe(400);
    expect(failure(() => everythingTypes(registry, patient, ['Condition'], readable))?.status).toBe(403);
  });

  it('plans the compartment, the dates per type, _since, and includes of readable types outside it', () => {
    const readable = (t: string) => ['Patient', 'Observation', 'Condition', 'Practitioner', 'Group'].includes(t);
    const types = everythingTypes(registry, patient, undefined, readable);
    const request = parseEverything([
      ['start', '2020'],
      ['_since', '2024-01-01T00:00:00Z'],
    ]);
    const plan = planEverything(patient, 'p1', types, request, {
      catalog,
      plan: { references: catalog.references, now: Date.UTC(2025, 0, 1), dialect: sqliteDialect },
      canRead: readable,
    });
    expect(plan.types).toEqual(['Condition', 'Group', 'Observation', 'Patient']);
    expect(plan.sort).toEqual([]);
    expect(plan.criteria.map((c) => c.kind)).toEqual(['compartment', 'forTypes', 'exceptResource']);
    // Of the four, only Observation has a `date` parameter.
    expect(plan.criteria[1]).toMatchObject({ kind: 'forTypes', types: ['Observation'] });
    // _since applies to all but the patient itself.
    expect(plan.criteria[2]).toMatchObject({ type: 'Patient', id: 'p1', inner: { kind: 'lastUpdated' } });
    expect(plan.linkParams).toEqual([
      ['start', '2020'],
      ['_since', '2024-01-01T00:00:00Z'],
    ]);
    // Practitioner is outside the compartment and readable; Group and Patient are members.
    expect(plan.includes).toHaveLength(1);
    expect(plan.includes[0].returnedTypes).toEqual(['Practitioner']);
    expect(plan.includes[0].sps).toContain(spId('Observation', 'performer'));

    // With _type, only those types: no includes.
    const typed = parseEverything([['_type', 'Observation,Condition']]);
    const typedTypes = everythingTypes(registry, patient, typed.types, readable);
    const typedPlan = planEverything(patient, 'p1', typedTypes, typed, {
      catalog,
      plan: { references: catalog.references, now: Date.UTC(2025, 0, 1), dialect: sqliteDialect },
      canRead: readable,
    });
    expect(typedPlan.types).toEqual(['Condition', 'Observation']);
    expect(typedPlan.includes).toEqual([]);
  });
});
