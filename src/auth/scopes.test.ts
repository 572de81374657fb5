import { describe, expect, it } from 'vitest';
import { DEFAULT_SCOPES, parseScope, ScopeError, ScopeSet, splitScopes, validateScopes } from './scopes.js';
import type { ParsedScope } from './scopes.js';
import type { FhirAction } from './principal.js';

const ACTIONS: FhirAction[] = ['create', 'read', 'update', 'delete', 'search'];

function allowed(scopes: string, type: string): string {
  const set = ScopeSet.of(scopes);
  return ACTIONS.filter((a) => set.allows(a, type))
    .map((a) => a[0])
    .join('');
}

describe('parseScope', () => {
  it('accepts SMART v2 system scopes with letters in cruds order', () => {
    expect(parseScope('system/Patient.rs')).toMatchObject({ kind: 'fhir', type: 'Patient', bits: 2 | 16 });
    expect(parseScope('system/*.cruds')).toMatchObject({ kind: 'fhir', type: '*', bits: 31 });
    expect(parseScope('system/Observation.c')).toMatchObject({ kind: 'fhir', bits: 1 });
  });

  it('accepts the v1 forms', () => {
    expect(parseScope('system/*.read')).toMatchObject({ bits: 2 | 16 });
    expect(parseScope('system/*.write')).toMatchObject({ bits: 1 | 4 | 8 });
    expect(parseScope('system/*.*')).toMatchObject({ bits: 31 });
    expect(parseScope('system/Patient.*')).toMatchObject({ type: 'Patient', bits: 31 });
  });

  it('accepts the scribe scopes', () => {
    expect(parseScope('scribe.read')).toEqual({ kind: 'named', scope: 'scribe.read' });
    expect(parseScope('scribe.write')).toEqual({ kind: 'named', scope: 'scribe.write' });
  });

  it.each([
    ['system/Patient.sr', 'order'],
    ['system/Patient.rr', 'order'],
    ['system/Patient.x', 'order'],
    ['system/Patient.', 'not a scope'],
    ['system/patient.rs', 'not a scope'],
    ['patient/Patient.rs', 'only system/'],
    ['user/*.read', 'only system/'],
    ['system/Observation.rs?category=vital-signs', 'query parameters'],
    ['openid', 'not a scope'],
    ['scribe.admin', 'not a scope'],
    ['system/*', 'not a scope'],
  ])('refuses %s with a clear reason', (scope, reason) => {
    const result = parseScope(scope);
    expect(typeof result).toBe('string');
    expect(result).toContain(reason);
  });

  it('refuses unknown resource types when it is given the list', () => {
    const isType = (t: string) => t === 'Patient';
    expect(parseScope('system/Patient.r', isType)).toMatchObject({ kind: 'fhir' });
    expect(parseScope('system/Patinet.r', isType)).toContain('not a FHIR R4 resource type');
    expect(parseScope('system/*.r', isType)).toMatchObject({ kind: 'fhir' });
  });
});

describe('validateScopes', () => {
  it('deduplicates and keeps the order', () => {
    expect(validateScopes(['scribe.read', 'system/*.rs', 'scribe.read'])).toEqual(['scribe.read', 'system/*.rs']);
  });

  it('names every bad scope', () => {
    expect(() => validateScopes(['system/*.rs', 'bad', 'user/x.r'])).toThrow(ScopeError);
    expect(() => validateScopes(['bad', 'user/x.r'])).toThrow(/"bad".*"user\/x.r"/);
  });

  it('the default scopes are valid', () => {
    expect(validateScopes([...DEFAULT_SCOPES])).toEqual(['system/*.cruds', 'scribe.read', 'scribe.write']);
  });
});

describe('ScopeSet', () => {
  it('maps letters to interactions', () => {
    expect(allowed('system/Patient.rs', 'Patient')).toBe('rs');
    expect(allowed('system/Patient.rs', 'Observation')).toBe('');
    expect(allowed('system/*.cruds', 'Anything')).toBe('cruds');
    expect(allowed('system/*.read', 'Patient')).toBe('rs');
    expect(allowed('system/*.write', 'Patient')).toBe('cud');
    expect(allowed('system/*.*', 'Patient')).toBe('cruds');
    expect(allowed('system/*.r system/Patient.c', 'Patient')).toBe('cr');
    expect(allowed('system/*.r system/Patient.c', 'Encounter')).toBe('r');
    expect(allowed('scribe.read scribe.write', 'Patient')).toBe('');
  });

  it('has() answers only named scopes', () => {
    const set = ScopeSet.of('system/*.cruds scribe.read');
    expect(set.has('scribe.read')).toBe(true);
    expect(set.has('scribe.write')).toBe(false);
    expect(set.has('system/*.cruds')).toBe(false);
  });

  it('ignores scopes it cannot parse (they grant nothing)', () => {
    expect(allowed('system/*.zz user/*.read', 'Patient')).toBe('');
  });

  it('covers() decides narrowing', () => {
    const parsed = (s: string) => parseScope(s) as ParsedScope;
    const account = ScopeSet.of('system/*.rs system/Patient.cud scribe.read');
    expect(account.covers(parsed('system/Patient.cruds'))).toBe(true);
    expect(account.covers(parsed('system/Observation.rs'))).toBe(true);
    expect(account.covers(parsed('system/*.read'))).toBe(true);
    expect(account.covers(parsed('system/Observation.c'))).toBe(false);
    expect(account.covers(parsed('system/*.c'))).toBe(false);
    expect(account.covers(parsed('system/*.cruds'))).toBe(false);
    expect(account.covers(parsed('scribe.read'))).toBe(true);
    expect(account.covers(parsed('scribe.write'))).toBe(false);
  });

  it('splitScopes splits on any whitespace and drops duplicates', () => {
    expect(splitScopes('  a b\tb\n c ')).toEqual(['a', 'b', 'c']);
    expect(splitScopes('')).toEqual([]);
  });
});
