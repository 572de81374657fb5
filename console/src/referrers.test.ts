/// <reference types="node" />
// (Node types for this test only: it reads the R4 definitions to check the console's compiled list against them.)
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  findReferrers,
  firstOfEachType,
  groupsOf,
  includedOf,
  MAX_DIRECTIVES,
  MAX_PARALLEL,
  referringTypes,
  revincludePath,
} from './referrers';

/** The source types whose reference parameters can target `target`, read from the R4 definitions here. */
function fromDefinitions(target: string): string[] {
  const r4 = JSON.parse(readFileSync(new URL('../../generated/r4.json', import.meta.url), 'utf8'));
  return Object.entries(
    r4.searchParameters as Record<string, { type: string; expression?: string; targets?: string[] }[]>,
  )
    .filter(([, params]) =>
      params.some((p) => p.type === 'reference' && p.expression && (!p.targets?.length || p.targets.includes(target))),
    )
    .map(([source]) => source)
    .sort();
}

const bundle = (included: [string, string][], outcome?: string) => ({
  status: 200,
  headers: new Headers(),
  body: {
    entry: [
      ...included.map(([resourceType, id]) => ({ resource: { resourceType, id }, search: { mode: 'include' } })),
      ...(outcome
        ? [{ resource: { resourceType: 'OperationOutcome', issue: [{ code: outcome }] }, search: { mode: 'outcome' } }]
        : []),
    ],
  },
});

describe('referrers', () => {
  it('lists, for a type, every type with a reference search parameter that can target it', () => {
    for (const target of ['Practitioner', 'Organization', 'Patient', 'Parameters', 'Binary']) {
      expect(referringTypes(target)).toEqual(fromDefinitions(target));
    }
    expect(referringTypes('Practitioner')).toEqual(expect.arrayContaining(['Encounter', 'Observation']));
    expect(referringTypes('Organization')).toContain('Patient');
    expect(referringTypes('Patient')).not.toContain('Organization');
  });

  it('asks one _revinclude per source type, at most 16 a search', () => {
    expect(groupsOf([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
    expect(groupsOf([], 16)).toEqual([]);
    expect(revincludePath('Practitioner', 'a.1', ['Encounter', 'Observation'])).toBe(
      '/fhir/Practitioner?_id=a.1&_elements=id&_revinclude=Encounter%3A*&_revinclude=Observation%3A*',
    );
  });

  it('reads the included resources of an answer, and a warning as something left out', () => {
    expect(includedOf(bundle([['Encounter', '1']]).body)).toEqual({
      found: [{ type: 'Encounter', id: '1' }],
      complete: true,
    });
    expect(includedOf(bundle([['Encounter', '1']], 'too-costly').body).complete).toBe(false);
    expect(includedOf({}).found).toEqual([]);
  });

  it('searches only the types the scopes allow, at most 3 requests at once, and keeps failures apart', async () => {
    const sources = referringTypes('Practitioner');
    let inFlight = 0;
    let most = 0;
    const asked: string[] = [];
    const ask = async (path: string) => {
      asked.push(path);
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 1));
      inFlight--;
      const types = new URLSearchParams(path.split('?')[1]).getAll('_revinclude').map((v) => v.split(':')[0]);
      if (types.includes('Encounter')) {
        return bundle([
          ['Encounter', 'e1'],
          ['Encounter', 'e2'],
          ['Practitioner', 'p1'],
        ]);
      }
      if (types.includes('Observation')) throw new Error('Forbidden: no');
      return bundle([]);
    };
    const all = await findReferrers('Practitioner', 'p1', ['system/*.rs'], ask);
    expect(asked).toHaveLength(Math.ceil(sources.length / MAX_DIRECTIVES));
    expect(all.requests).toBe(asked.length);
    expect(most).toBe(MAX_PARALLEL);
    // Itself (a Practitioner that refers to itself) is not among them.
    expect(all.found).toEqual([
      { type: 'Encounter', id: 'e1' },
      { type: 'Encounter', id: 'e2' },
    ]);
    expect(all.failed).toHaveLength(1);
    expect(all.failed[0].types).toContain('Observation');
    expect(all.failed[0].message).toBe('Forbidden: no');
    expect(all.notAllowed).toEqual([]);
    expect(all.candidates).toBe(sources.length);

    asked.length = 0;
    const some = await findReferrers(
      'Practitioner',
      'p1',
      ['system/Practitioner.rs', 'system/Encounter.rs', 'system/Observation.r'],
      ask,
    );
    expect(asked).toEqual(['/fhir/Practitioner?_id=p1&_elements=id&_revinclude=Encounter%3A*']);
    expect(some.notAllowed).toEqual(sources.filter((s) => s !== 'Encounter'));

    asked.length = 0;
    const none = await findReferrers('Practitioner', 'p1', ['system/Encounter.rs'], ask);
    expect(asked).toEqual([]);
    expect(none.searchable).toBe(false);
  });

  it('shows one of each type before a second of any, grouped by type', () => {
    const found = [
      ...['1', '2', '3', '4'].map((id) => ({ type: 'Observation', id })),
      { type: 'Encounter', id: 'a' },
      { type: 'Account', id: 'x' },
      { type: 'Encounter', id: 'b' },
    ];
    expect(firstOfEachType(found, 5).map((r) => `${r.type}/${r.id}`)).toEqual([
      'Account/x',
      'Encounter/a',
      'Encounter/b',
      'Observation/1',
      'Observation/2',
    ]);
    expect(firstOfEachType(found, 100)).toHaveLength(found.length);
  });
});
