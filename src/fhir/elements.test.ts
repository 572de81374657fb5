import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { subsetter } from './elements.js';

const registry = loadR4Definitions();
const patient = JSON.stringify({
  resourceType: 'Patient',
  id: 'p',
  meta: { versionId: '1' },
  text: { status: 'generated', div: '<div/>' },
  name: [{ family: 'X' }],
  _birthDate: { extension: [] },
  birthDate: '2000',
  deceasedBoolean: false,
  contact: [{ name: { family: 'Y' } }],
});

describe('_summary and _elements', () => {
  it('returns resources untouched without them', () => {
    expect(subsetter(registry, undefined, undefined)).toBeUndefined();
    expect(subsetter(registry, 'false', undefined)).toBeUndefined();
  });
  it('_elements keeps the named elements (with choice and primitive-extension keys), id and meta', () => {
    const out = JSON.parse(subsetter(registry, undefined, ['birthDate', 'Patient.deceased'])!(patient, 'Patient'));
    expect(Object.keys(out)).toEqual(['resourceType', 'id', 'meta', '_birthDate', 'birthDate', 'deceasedBoolean']);
    expect(out.meta.tag[0].code).toBe('SUBSETTED');
  });
  it('_summary=true keeps the summary elements', () => {
    const out = JSON.parse(subsetter(registry, 'true', undefined)!(patient, 'Patient'));
    expect(Object.keys(out)).toEqual([
      'resourceType',
      'id',
      'meta',
      'name',
      '_birthDate',
      'birthDate',
      'deceasedBoolean',
    ]);
  });
  it('_summary=text and data', () => {
    expect(Object.keys(JSON.parse(subsetter(registry, 'text', undefined)!(patient, 'Patient')))).toEqual([
      'resourceType',
      'id',
      'meta',
      'text',
    ]);
    expect(Object.keys(JSON.parse(subsetter(registry, 'data', undefined)!(patient, 'Patient')))).not.toContain('text');
  });
  it('has summary elements for every resource type', () => {
    for (const type of registry.resourceTypes) expect(registry.summaryElements(type), type).not.toHaveLength(0);
  });
});
