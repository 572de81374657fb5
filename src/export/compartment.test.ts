import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { patientCompartmentParams } from './compartment.js';
import { fileName, parseFileName, progressText } from './service.js';
import { START } from './jobs.js';

describe('the Patient compartment', () => {
  it('keeps the types with parameters and their parameters', () => {
    expect(
      patientCompartmentParams({
        compartment: (code) =>
          code === 'Patient'
            ? {
                code,
                url: 'http://hl7.org/fhir/CompartmentDefinition/patient',
                members: {
                  Observation: { params: ['subject', 'performer'], self: false },
                  Patient: { params: [], self: true },
                },
              }
            : undefined,
      }),
    ).toEqual(new Map([['Observation', ['subject', 'performer']]]));
    expect(() => patientCompartmentParams({ compartment: () => undefined })).toThrow(/Patient CompartmentDefinition/);
  });

  it("is R4's: Observation by subject and performer, Group by member, no Organization", () => {
    const params = patientCompartmentParams(loadR4Definitions());
    expect(params.get('Observation')).toEqual(['subject', 'performer']);
    expect(params.get('Group')).toEqual(['member']);
    expect(params.get('Patient')).toEqual(['link']);
    expect(params.has('Organization')).toBe(false);
    expect(params.size).toBeGreaterThan(60);
  });
});

describe('output file names', () => {
  it('round-trip, and nothing else parses', () => {
    expect(fileName('Observation', 3)).toBe('Observation-3.ndjson');
    expect(parseFileName('Observation-3.ndjson')).toEqual({ type: 'Observation', fileNo: 3 });
    for (const bad of [
      'Observation-0.ndjson',
      'observation-1.ndjson',
      'Observation-1.json',
      '../x-1.ndjson',
      'Observation-1',
    ]) {
      expect(parseFileName(bad), bad).toBeUndefined();
    }
  });
});

describe('progressText', () => {
  const spec = { level: 'system' as const, types: ['Patient', 'Observation'], typeFilters: [] };
  it('names the type being walked and the resources written', () => {
    expect(progressText({ state: 'queued', spec, progress: START })).toBe('queued');
    expect(progressText({ state: 'running', spec, progress: { ...START, typeIndex: 1, resources: 12 } })).toBe(
      'Observation (type 2 of 2), 12 resources written',
    );
    expect(progressText({ state: 'running', spec, progress: { ...START, typeIndex: 2, resources: 20 } })).toBe(
      'Observation (type 2 of 2), 20 resources written',
    );
  });
});
