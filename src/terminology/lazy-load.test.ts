// The R4 terminology is read on the first terminology request, not when the server starts: loading the
// engine (which the route table imports) reads nothing; the first look-up reads it, once.
import { describe, expect, it, vi } from 'vitest';
import * as definitions from '../definitions/terminology.js';

vi.mock('../definitions/terminology.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../definitions/terminology.js')>();
  return { ...actual, loadR4Terminology: vi.fn(actual.loadR4Terminology) };
});

describe('the R4 terminology file', () => {
  it('is read on first use, once', async () => {
    const { TerminologyEngine } = await import('./engine.js');
    const engine = new TerminologyEngine({ valueSets: async () => [], codeSystems: async () => [] });
    expect(definitions.loadR4Terminology).not.toHaveBeenCalled();
    expect(await engine.findValueSet('http://hl7.org/fhir/ValueSet/administrative-gender')).toMatchObject({
      name: 'AdministrativeGender',
    });
    expect(await engine.findCodeSystem('http://hl7.org/fhir/administrative-gender')).toMatchObject({
      content: 'complete',
    });
    expect(definitions.loadR4Terminology).toHaveBeenCalledTimes(1);
  });
});
