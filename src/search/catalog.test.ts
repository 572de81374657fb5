// The search parameter catalog: every R4 parameter of every type is served (or listed as unsupported
// on purpose), parameter ids never collide, and extraction gives the rows docs/search.md describes.
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { spId } from './catalog.js';
import { createSearchCatalog } from './engine.js';

const registry = loadR4Definitions();
const catalog = createSearchCatalog(registry, 'https://fhir.example/fhir');

describe('search parameter catalog', () => {
  it('serves every R4 parameter but _text, _content, _query and phonetic', () => {
    const unsupported = new Set<string>();
    let served = 0;
    for (const type of registry.resourceTypes) {
      for (const param of catalog.forType(type).params.values()) {
        if (param.kind === 'unsupported') unsupported.add(param.code);
        else served++;
      }
    }
    expect([...unsupported].sort()).toEqual(['_content', '_query', '_text', 'phonetic']);
    expect(catalog.skipped).toEqual([]);
    expect(served).toBeGreaterThan(2500);
  });

  it('gives every parameter, derived row set and composite component its own id', () => {
    const ids = new Map<number, string>();
    for (const type of registry.resourceTypes) {
      for (const param of catalog.forType(type).params.values()) {
        const keys = [
          [param.sp, `${type}.${param.code}`],
          [param.extraSp, `${type}.${param.code}:extra`],
          ...(param.components ?? []).flatMap((c, i) => [
            [c.sp, `${type}.${param.code}$${i}`],
            [c.extraSp, `${type}.${param.code}$${i}:extra`],
          ]),
        ] as [number, string][];
        for (const [id, name] of keys) {
          expect(ids.get(id) ?? name, `${name} collides`).toBe(name);
          ids.set(id, name);
          expect(Number.isSafeInteger(id)).toBe(true);
        }
      }
    }
    expect(spId('Patient', 'name')).toBe(spId('Patient', 'name'));
  });

  it("adds the specification's Encounter _length and lists it in the CapabilityStatement", () => {
    const capabilities = catalog.capabilities('Encounter');
    expect(capabilities.find((c) => c.name === '_length')).toMatchObject({ type: 'number' });
    expect(capabilities.find((c) => c.name === 'patient')).toMatchObject({
      type: 'reference',
      definition: 'http://hl7.org/fhir/SearchParameter/clinical-patient',
    });
    expect(capabilities.map((c) => c.name)).not.toContain('_text');
  });

  it('extracts the rows of a Patient', () => {
    const sink = catalog.extract({
      resourceType: 'Patient',
      id: 'x',
      name: [{ family: 'Chloé', given: ['Zoë'] }],
      gender: 'female',
      birthDate: '1980-05',
      identifier: [{ system: 's', value: 'v', type: { coding: [{ system: 't', code: 'MR' }] } }],
      generalPractitioner: [{ reference: 'https://fhir.example/fhir/Practitioner/1' }, { reference: 'Organization/2' }],
    });
    const byCode = (table: string) => {
      const params = [...catalog.forType('Patient').params.values()];
      return (sink.rows.get(table as never) ?? []).map((row) => {
        const param = params.find((p) => p.sp === row[0] || p.extraSp === row[0])!;
        return [`${param.code}${param.extraSp === row[0] ? ':extra' : ''}`, ...row.slice(2)];
      });
    };
    expect(byCode('idx_string').filter(([code]) => code === 'name')).toEqual([
      ['name', 'chloe', 'Chloé'],
      ['name', 'zoe', 'Zoë'],
      ['name', 'zoe chloe', 'Zoë Chloé'],
    ]);
    expect(byCode('idx_token')).toEqual(
      expect.arrayContaining([
        ['gender', 'http://hl7.org/fhir/administrative-gender', 'female', null],
        ['identifier', 's', 'v', null],
        ['identifier:extra', 't|MR', 'v', null],
      ]),
    );
    expect(byCode('idx_date')).toEqual([['birthdate', Date.UTC(1980, 4, 1), Date.UTC(1980, 5, 1)]]);
    expect(byCode('idx_reference')).toEqual([
      ['general-practitioner', 'Practitioner', '1'],
      ['general-practitioner', 'Organization', '2'],
    ]);
  });

  it("writes a composite's rows only for the elements that have every component", () => {
    const sink = catalog.extract({
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8302-2' }] },
      valueQuantity: { value: 180, unit: 'cm', system: 'http://unitsofmeasure.org', code: 'cm' },
      component: [
        { code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] }, valueQuantity: { value: 120 } },
        { code: { coding: [{ system: 'http://loinc.org', code: '8462-4' }] } },
      ],
    });
    const composites = [...catalog.forType('Observation').params.values()].filter((p) => p.kind === 'composite');
    const written = new Map<string, number>();
    for (const rows of sink.rows.values()) {
      for (const row of rows) {
        for (const param of composites) {
          param.components!.forEach((component, i) => {
            if (component.sp !== row[0]) return;
            const key = `${param.code}$${i} grp ${row[1]}`;
            written.set(key, (written.get(key) ?? 0) + 1);
          });
        }
      }
    }
    // code-value-quantity and combo-code-value-quantity for the value (in UCUM: as written and canonical);
    // component-code-value-quantity for the first component only (the second has no value); nothing for
    // -concept, -date or -string.
    expect(Object.fromEntries(written)).toEqual({
      'code-value-quantity$0 grp 1': 1,
      'code-value-quantity$1 grp 1': 2,
      'combo-code-value-quantity$0 grp 1': 1,
      'combo-code-value-quantity$1 grp 1': 2,
      'combo-code-value-quantity$0 grp 2': 1,
      'combo-code-value-quantity$1 grp 2': 1,
      'component-code-value-quantity$0 grp 1': 1,
      'component-code-value-quantity$1 grp 1': 1,
    });
  });

  it('refuses a resource over its row limit at the row that crosses it, naming the parameter', () => {
    const patient = {
      resourceType: 'Patient',
      name: Array.from({ length: 1_000 }, (_, i) => ({ family: `F${i}` })),
      gender: 'male',
    };
    // Per name one `family` row and one `name` row (the assembled name is the family, stored once); then
    // `gender`, and `deceased` (false when absent).
    const rows = catalog.extract(patient).size;
    expect(rows).toBe(2_002);
    expect(catalog.extract(patient, rows).size).toBe(rows);
    let refusal: unknown;
    try {
      catalog.extract(patient, 1_500);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(AppError);
    expect(refusal).toMatchObject({ code: 'too-many-index-rows', status: 422 });
    expect((refusal as AppError).message).toMatch(
      /^This Patient needs more than 1,500 search index rows \(reached while indexing '(family|name)', which has 1,000 values\)/,
    );
    expect(() => catalog.extract(patient, rows - 1)).toThrow(AppError);
  });
});
