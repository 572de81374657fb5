// Stage 1 alone: query pairs → SearchRequest, with no registry and no database.
import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { LIMITS, parseParamKey, parseSearch } from './parse.js';

const parse = (query: string) => parseSearch([...new URLSearchParams(query)]);

function status(fn: () => unknown): number {
  try {
    fn();
    return 200;
  } catch (error) {
    return error instanceof AppError ? error.status : 500;
  }
}

describe('parameter names', () => {
  it.each([
    ['name', { kind: 'param', code: 'name', modifier: undefined }],
    ['name:exact', { kind: 'param', code: 'name', modifier: 'exact' }],
    [
      'subject:Patient.name',
      { kind: 'param', code: 'subject', modifier: 'Patient', next: { kind: 'param', code: 'name' } },
    ],
    [
      'patient.organization.name:contains',
      {
        kind: 'param',
        code: 'patient',
        next: { kind: 'param', code: 'organization', next: { kind: 'param', code: 'name', modifier: 'contains' } },
      },
    ],
    [
      '_has:Observation:patient:code',
      { kind: 'has', type: 'Observation', reference: 'patient', next: { kind: 'param', code: 'code' } },
    ],
    [
      '_has:Observation:patient:_has:AuditEvent:entity:agent',
      {
        kind: 'has',
        type: 'Observation',
        next: { kind: 'has', type: 'AuditEvent', reference: 'entity', next: { kind: 'param', code: 'agent' } },
      },
    ],
    [
      '_has:Observation:patient:code:not',
      { kind: 'has', type: 'Observation', next: { kind: 'param', code: 'code', modifier: 'not' } },
    ],
    [
      '_has:Encounter:patient:patient.name',
      { kind: 'has', next: { kind: 'param', code: 'patient', next: { code: 'name' } } },
    ],
  ])('%s', (name, expected) => {
    expect(parseParamKey(name)).toMatchObject(expected);
  });

  it.each(['', ':exact', 'name:', 'na me', 'name.', '_has:Observation', '_has::patient:code', 'a:b:c', 'x;y'])(
    'refuses %j',
    (name) => {
      expect(status(() => parseParamKey(name))).toBe(400);
    },
  );

  it('limits chain depth and name length', () => {
    expect(status(() => parseParamKey(`${'subject.'.repeat(LIMITS.chainDepth)}name`))).toBe(200);
    // Beyond the limits: too costly (422), not malformed.
    expect(status(() => parseParamKey(`${'subject.'.repeat(LIMITS.chainDepth + 1)}name`))).toBe(422);
    expect(status(() => parseParamKey(`${'_has:Observation:subject:'.repeat(LIMITS.chainDepth + 1)}code`))).toBe(422);
    expect(status(() => parseParamKey('x'.repeat(LIMITS.nameLength + 1)))).toBe(400);
  });
});

describe('values', () => {
  it('splits OR lists on unescaped commas, keeps escapes for the type parsers, drops repeats', () => {
    const request = parse('name=a,b\\,c,a&identifier=s|v\\|w');
    expect(request.criteria.map((c) => c.values)).toEqual([['a', 'b\\,c'], ['s|v\\|w']]);
    expect(request.criteria[0].value).toBe('a,b\\,c,a');
  });

  it('keeps repeated parameters as separate criteria (AND)', () => {
    expect(parse('date=ge2020&date=le2021').criteria.map((c) => c.values[0])).toEqual(['ge2020', 'le2021']);
  });

  it('ignores (and reports) parameters without a value, and skips the transport ones', () => {
    const request = parse('name=&_format=json&_pretty=true&gender=male');
    expect(request.criteria.map((c) => c.name)).toEqual(['gender']);
    expect(request.ignored).toEqual([{ name: 'name', reason: 'it has no value' }]);
  });

  it('limits the number of search parameters', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => `name=n${i}`).join('&');
    expect(status(() => parse(many(LIMITS.criteria)))).toBe(200);
    expect(status(() => parse(many(LIMITS.criteria + 1)))).toBe(422);
  });

  it('refuses U+0000 and too many OR values', () => {
    expect(status(() => parse('name=a%00b'))).toBe(400);
    expect(status(() => parse(`_id=${Array.from({ length: LIMITS.orValues }, (_, i) => i).join(',')}`))).toBe(200);
    expect(status(() => parse(`_id=${Array.from({ length: LIMITS.orValues + 1 }, (_, i) => i).join(',')}`))).toBe(422);
  });
});

describe('result parameters', () => {
  it('reads _sort, _count, _total, _summary, _elements, _include, _revinclude, _type and _cursor', () => {
    const request = parse(
      '_sort=-date,code,-date&_count=5&_total=accurate&_elements=name,gender&_include=Observation:patient&_revinclude:iterate=Provenance:target:Patient&_cursor=abc&_type=Patient,Group',
    );
    expect(request.sort).toEqual([
      { code: 'date', descending: true },
      { code: 'code', descending: false },
    ]);
    expect(request.count).toBe(5);
    expect(request.total).toBe('accurate');
    expect(request.elements).toEqual(['name', 'gender']);
    expect(request.includes).toMatchObject([
      { reverse: false, iterate: false, sourceType: 'Observation', param: 'patient' },
      { reverse: true, iterate: true, sourceType: 'Provenance', param: 'target', targetType: 'Patient' },
    ]);
    expect(request.cursor).toBe('abc');
    expect(request.types).toEqual(['Patient', 'Group']);
    expect(request.resultParams.map(([n]) => n)).not.toContain('_cursor');
  });

  it('defaults _count to 20 and serves more than 1000 as 1000', () => {
    expect(parse('').count).toBe(20);
    expect(parse('_count=5000').count).toBe(1000);
    expect(parse('_count=0').count).toBe(0);
  });

  it.each([
    '_count=-1',
    '_count=abc',
    '_total=some',
    '_summary=short',
    '_sort=na me',
    '_sort:desc=date',
    '_include=Observation',
    '_include=a:b:c:d',
    '_include:bogus=Observation:patient',
    '_summary=true&_elements=name',
  ])('refuses %s', (query) => {
    expect(status(() => parse(query))).toBe(400);
  });

  it('limits sort keys and include directives, counting repeats once', () => {
    expect(parse(`_sort=${Array.from({ length: 100 }, () => 'name').join(',')}`).sort).toHaveLength(1);
    expect(
      status(() => parse(`_sort=${Array.from({ length: LIMITS.sortKeys + 1 }, (_, i) => `p${i}`).join(',')}`)),
    ).toBe(422);
    const many = Array.from({ length: 500 }, () => '_include:iterate=Patient:organization').join('&');
    expect(parse(many).includes).toHaveLength(1);
  });
});
