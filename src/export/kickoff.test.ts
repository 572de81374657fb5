import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { kickoffPairs, parseInstant, parseKickoff, parsePrefer, parseTypeFilter } from './kickoff.js';

const isResourceType = (name: string) => ['Patient', 'Observation', 'Group'].includes(name);
const parse = (query: string, lenient = false) =>
  parseKickoff([...new URLSearchParams(query)], { lenient, isResourceType });

function failure(fn: () => unknown): AppError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected an AppError');
}

describe('parsePrefer', () => {
  it('reads respond-async and handling=lenient in any order and case', () => {
    expect(parsePrefer('respond-async')).toEqual({ respondAsync: true, lenient: false });
    expect(parsePrefer('Handling = lenient, Respond-Async')).toEqual({ respondAsync: true, lenient: true });
    expect(parsePrefer('respond-async; handling=strict')).toEqual({ respondAsync: true, lenient: false });
    expect(parsePrefer(undefined)).toEqual({ respondAsync: false, lenient: false });
  });
});

describe('parseKickoff', () => {
  it('reads _outputFormat, _since, _type (deduplicated, repeatable) and _typeFilter', () => {
    expect(
      parse(
        '_outputFormat=ndjson&_since=2024-01-31T12:00:00Z&_type=Patient,Observation&_type=Patient&_typeFilter=Observation%3Fcode%3D1',
      ),
    ).toEqual({
      since: Date.parse('2024-01-31T12:00:00Z'),
      types: ['Patient', 'Observation'],
      typeFilters: [{ type: 'Observation', query: 'code=1' }],
      ignored: [],
    });
    expect(parse('')).toEqual({ since: undefined, types: undefined, typeFilters: [], ignored: [] });
    for (const format of ['application/fhir+ndjson', 'application/ndjson', 'ndjson']) {
      expect(() => parse(`_outputFormat=${encodeURIComponent(format)}`)).not.toThrow();
    }
  });

  it('refuses bad values with 400 naming the parameter', () => {
    for (const [query, expression] of [
      ['_outputFormat=text/csv', '_outputFormat'],
      ['_since=2024-01-31', '_since'],
      ['_since=2024-01-31T12:00:00', '_since'],
      ['_since=2024-01-31T12:00:00Z&_since=2024-01-31T12:00:00Z', '_since'],
      ['_type=Nope', '_type'],
      ['_type=', '_type'],
      ['_typeFilter=Nope%3Fx%3D1', '_typeFilter'],
    ]) {
      const error = failure(() => parse(query));
      expect(error.status, query).toBe(400);
      expect(error.options.expression, query).toBe(expression);
    }
  });

  it('refuses unknown and unsupported parameters unless lenient, then ignores them', () => {
    for (const name of ['foo', '_elements', 'patient', 'includeAssociatedData', 'organizeOutputBy']) {
      const error = failure(() => parse(`${name}=x`));
      expect(error.code).toBe('operation-not-supported');
      expect(error.message).toContain(name);
      expect(parse(`${name}=x`, true).ignored).toEqual([name]);
    }
  });

  it('bounds the number of _typeFilter queries and their length', () => {
    const many = Array.from({ length: 33 }, () => '_typeFilter=Patient%3Fname%3Da').join('&');
    expect(failure(() => parse(many)).message).toMatch(/32/);
    expect(failure(() => parseTypeFilter(`Patient?name=${'a'.repeat(2000)}`, isResourceType)).message).toMatch(/2000/);
  });
});

describe('kickoffPairs', () => {
  it('joins the query string and a Parameters body', () => {
    expect(
      kickoffPairs('_type=Patient', {
        resourceType: 'Parameters',
        parameter: [
          { name: '_since', valueInstant: '2024-01-01T00:00:00Z' },
          { name: 'patient', valueReference: { reference: 'Patient/1' } },
        ],
      }),
    ).toEqual([
      ['_type', 'Patient'],
      ['_since', '2024-01-01T00:00:00Z'],
      ['patient', 'Patient/1'],
    ]);
    expect(kickoffPairs('', undefined)).toEqual([]);
  });

  it('refuses a body that is no Parameters, or a parameter without name or value', () => {
    expect(failure(() => kickoffPairs('', { resourceType: 'Patient' })).status).toBe(400);
    expect(failure(() => kickoffPairs('', { resourceType: 'Parameters', parameter: {} })).status).toBe(400);
    expect(
      failure(() => kickoffPairs('', { resourceType: 'Parameters', parameter: [{ valueString: 'x' }] })).status,
    ).toBe(400);
    expect(failure(() => kickoffPairs('', { resourceType: 'Parameters', parameter: [{ name: '_type' }] })).status).toBe(
      400,
    );
  });
});

describe('parseInstant', () => {
  it('takes instants with seconds and a zone only', () => {
    expect(parseInstant('_since', '2024-01-31T12:00:00.123+02:00')).toBe(Date.parse('2024-01-31T10:00:00.123Z'));
    expect(() => parseInstant('_since', '2024-13-31T12:00:00Z')).toThrow(AppError);
    expect(() => parseInstant('_since', 'yesterday')).toThrow(AppError);
  });
});
