import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { defaultDefinitionsPath } from '../definitions/registry.js';
import type { ValueSetResource } from '../definitions/terminology.js';
import type { R4Definitions } from '../definitions/types.js';
import { expandRequiredValueSets, requiredValueSetUrls } from './build-r4-bindings.js';
import { TerminologyEngine } from './engine.js';

const definitions = JSON.parse(readFileSync(defaultDefinitionsPath(), 'utf8')) as R4Definitions;

function engineWith(valueSets: ValueSetResource[]): TerminologyEngine {
  return new TerminologyEngine({
    valueSets: async (url) => valueSets.filter((vs) => vs.url === url),
    codeSystems: async () => [],
  });
}

describe('the required value sets of generated/r4.json', () => {
  it('are those the R4 elements bind, each as the terminology engine expands it', async () => {
    const urls = requiredValueSetUrls(definitions.types);
    expect(urls).toHaveLength(226);
    expect(Object.keys(definitions.valueSets)).toEqual(urls);
    expect(await expandRequiredValueSets(urls)).toEqual(definitions.valueSets);
  });

  it('expand to codes but for 5, unchecked with the reason the engine gives', () => {
    const unchecked = Object.entries(definitions.valueSets).filter(([, rule]) => 'unchecked' in rule);
    expect(Object.fromEntries(unchecked)).toEqual({
      'http://hl7.org/fhir/ValueSet/characteristic-combination': {
        unchecked: expect.stringMatching(/^terminology-not-found: No value set .*characteristic-combination/),
      },
      'http://hl7.org/fhir/ValueSet/currencies': {
        unchecked: expect.stringMatching(/^terminology-not-supported: .*code system urn:iso:std:iso:4217/),
      },
      'http://hl7.org/fhir/ValueSet/mimetypes': {
        unchecked: expect.stringMatching(/^terminology-not-supported: .*code system urn:ietf:bcp:13/),
      },
      'http://hl7.org/fhir/ValueSet/ucum-units': {
        unchecked: expect.stringMatching(/^terminology-not-supported: .*code system http:\/\/unitsofmeasure.org/),
      },
      'http://loinc.org/vs/LL379-9': { unchecked: expect.stringMatching(/^terminology-not-found: No value set/) },
    });
    // An empty list would refuse every code of its elements.
    const empty = Object.entries(definitions.valueSets).filter(
      ([, rule]) => 'codes' in rule && Object.values(rule.codes).flat().length === 0,
    );
    expect(empty).toEqual([]);
  });
});

describe('expandRequiredValueSets', () => {
  it('groups the codes by system, each list sorted whatever the compose order', async () => {
    const url = 'http://example.org/ValueSet/mixed';
    const engine = engineWith([
      {
        resourceType: 'ValueSet',
        url,
        compose: {
          include: [
            { system: 'http://example.org/b', concept: [{ code: 'z' }] },
            { system: 'http://example.org/a', concept: [{ code: 'y' }, { code: 'x' }] },
          ],
        },
      },
    ]);
    const result = await expandRequiredValueSets([url], engine);
    expect(JSON.stringify(result[url])).toBe(
      JSON.stringify({ codes: { 'http://example.org/a': ['x', 'y'], 'http://example.org/b': ['z'] } }),
    );
  });

  it('records a value set past the engine bounds as unchecked', async () => {
    const url = 'http://example.org/ValueSet/loop';
    const engine = engineWith([{ resourceType: 'ValueSet', url, compose: { include: [{ valueSet: [url] }] } }]);
    expect(await expandRequiredValueSets([url], engine)).toEqual({
      [url]: { unchecked: expect.stringMatching(/^expansion-too-costly: Value set .*loop includes itself/) },
    });
  });

  it('fails on an error that does not say the value set cannot be expanded', async () => {
    const engine = new TerminologyEngine({
      valueSets: async () => {
        throw new Error('the stored value sets cannot be read');
      },
      codeSystems: async () => [],
    });
    await expect(expandRequiredValueSets(['http://example.org/ValueSet/any'], engine)).rejects.toThrow(
      'the stored value sets cannot be read',
    );
  });
});
