import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../errors.js';
import { fixturesDir } from '../../../test/support/fixtures.js';
import { applyJsonPatch } from './json-patch.js';

interface PatchCase {
  comment: string;
  doc: unknown;
  patch: unknown;
  expected?: unknown;
  error?: string;
}

const cases = JSON.parse(
  readFileSync(join(fixturesDir(), 'fhir-test-cases-r4-fhirpath-patch', 'patch', 'json-patch-tests.json'), 'utf8'),
) as PatchCase[];

describe('applyJsonPatch against the fhir-test-cases JSON Patch suite', () => {
  it.each(cases.map((c) => [c.comment, c] as const))('%s', (_comment, testCase) => {
    if (testCase.error !== undefined) {
      expect(() => applyJsonPatch(testCase.doc, testCase.patch)).toThrow(AppError);
    } else {
      expect(applyJsonPatch(testCase.doc, testCase.patch)).toEqual(testCase.expected);
    }
  });

  it('leaves the input untouched', () => {
    const doc = { a: [1, 2] };
    applyJsonPatch(doc, [{ op: 'add', path: '/a/-', value: 3 }]);
    expect(doc).toEqual({ a: [1, 2] });
  });

  it('refuses malformed operations with 400 and failing ones with 422', () => {
    expect(() => applyJsonPatch({}, { op: 'add' })).toThrow(expect.objectContaining({ code: 'bad-request' }));
    expect(() => applyJsonPatch({}, [{ op: 'jump', path: '/a' }])).toThrow(
      expect.objectContaining({ code: 'bad-request' }),
    );
    expect(() => applyJsonPatch({ a: 1 }, [{ op: 'test', path: '/a', value: 2 }])).toThrow(
      expect.objectContaining({ code: 'patch-failed' }),
    );
  });

  it('answers an operation the library throws on (a member added to a primitive) with 422, naming it', () => {
    const patch = [
      { op: 'add', path: '', value: true },
      { op: 'add', path: '/active', value: {} },
    ];
    expect(() => applyJsonPatch({ resourceType: 'Patient' }, patch)).toThrow(
      expect.objectContaining({ code: 'patch-failed', message: expect.stringContaining('operation 1 (add /active)') }),
    );
  });

  it('refuses copies that would grow the document past maxBytes before making them (64 doublings)', () => {
    const patch = Array.from({ length: 64 }, () => ({ op: 'copy', from: '/a', path: '/a/-' }));
    const started = Date.now();
    expect(() => applyJsonPatch({ a: ['x'.repeat(100)] }, patch, 1024 * 1024)).toThrow(
      expect.objectContaining({ code: 'patch-failed', message: expect.stringContaining('more than 1048576 bytes') }),
    );
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
