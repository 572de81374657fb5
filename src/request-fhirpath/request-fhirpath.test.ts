import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { compileRequestFhirPath, REQUEST_FHIRPATH_LIMITS, RequestFhirPathBudget } from './request-fhirpath.js';

const patient = {
  resourceType: 'Patient',
  name: [{ family: 'a'.repeat(40) + '!', given: ['Ann', 'B'] }, { family: 'Doe' }],
};

const run = (expression: string, budget = new RequestFhirPathBudget()) =>
  compileRequestFhirPath(expression, budget)(patient);

function refusal(expression: string, budget?: RequestFhirPathBudget): AppError {
  try {
    run(expression, budget);
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error(`${expression} was not refused`);
}

describe('request FHIRPath', () => {
  it('evaluates ordinary patch paths as medplum does', () => {
    expect(run("Patient.name.where(family = 'Doe').family")).toEqual(['Doe']);
    expect(run('Patient.name[0].given[1]')).toEqual(['B']);
    expect(run("Patient.name.where(family.matches('^D.e$')).exists()")).toEqual([true]);
    expect(run("Patient.name.where(given.exists() and family.startsWith('a')).given.count()")).toEqual([2]);
  });

  it('answers runaway patterns correctly, on the linear engine', () => {
    // The family names end in "!" and "e": only patterns that can match the empty string at the end match.
    const families = (pattern: string) => run(`Patient.name.where(family.matches('${pattern}')).family`);
    for (const pattern of ['(a+)+$', '(.*a){20}$', '(a|aa)+$', '^(a|a?)+$']) expect(families(pattern)).toEqual([]);
    for (const pattern of ['(a|a)*$', '(a*)*$']) expect(families(pattern)).toEqual(['a'.repeat(40) + '!', 'Doe']);
    expect(run("Patient.name.where(family.matches('(a+)+!$')).exists()")).toEqual([true]);
  });

  it('replaceMatches and replace: groups, names, empty matches, literal patterns', () => {
    expect(run("'2024-05-01'.replaceMatches('(\\\\d+)-(\\\\d+)-(\\\\d+)', '$3/$2/$1')")).toEqual(['01/05/2024']);
    expect(run("'2024-05'.replaceMatches('(?<y>\\\\d+)-(?<m>\\\\d+)', '${m}.${y}')")).toEqual(['05.2024']);
    expect(run("'abc'.replaceMatches('x*', '-')")).toEqual(['abc'.replace(/x*/g, '-')]);
    expect(run("'a.b.c'.replace('.', '$&')")).toEqual(['a$&b$&c']);
    expect(run("'abc'.replace('', 'x')")).toEqual(['xaxbxcx']);
    expect(run("''.replace('', 'x')")).toEqual(['x']);
    // Later searches still see the start of the string and what precedes them.
    expect(run("'aaa'.replaceMatches('^a', 'b')")).toEqual(['baa']);
    expect(run("'ab ab'.replaceMatches('\\\\bab', 'x')")).toEqual(['x x']);
    // JavaScript's \\s (a no-break space too), which RE2 spells differently.
    expect(run("'a b\u00a0c'.replaceMatches('\\\\s', '_')")).toEqual(['a_b_c']);
    expect(run("'x2024y'.replaceMatches('(?<n>\\\\d+)', '[$1|${n}|$&|$$]')")).toEqual(['x[2024|2024|2024|$]y']);
  });

  it('refuses a search it cannot afford before running it', () => {
    const huge = { resourceType: 'Patient', name: [{ family: 'a'.repeat(16 * 1024 * 1024) }] };
    const started = performance.now();
    const compiled = compileRequestFhirPath(
      "Patient.name.where(family.matches('(a|b){1,100}c'))",
      new RequestFhirPathBudget(),
    );
    expect(() => compiled(huge)).toThrow(/too costly/);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('refuses patterns that are not regular, with a 400 naming the problem', () => {
    const error = refusal("Patient.name.where(family.matches('(a)\\\\1'))");
    expect(error.code).toBe('fhirpath-unsupported');
    expect(error.status).toBe(400);
    expect(error.message).toMatch(/backreferences/);
    expect(refusal("Patient.name[0].family.replaceMatches('(?=a)', 'b')").message).toMatch(/lookahead/);
  });

  it('refuses functions whose work is not linear, and the union operator', () => {
    for (const expression of [
      'Patient.name.distinct()',
      'Patient.name.union(Patient.name)',
      'Patient.name | Patient.name',
      'Patient.name.trace()',
      'Patient.descendants()',
    ]) {
      const error = refusal(expression);
      expect(error.code, expression).toBe('fhirpath-unsupported');
      expect(error.status).toBe(400);
    }
  });

  it('keeps the sides of an equivalence, which sorts them, small', () => {
    expect(run("Patient.name[1].family ~ 'doe'")).toEqual([true]);
    const many = { resourceType: 'Patient', name: [{ given: Array.from({ length: 1001 }, (_, i) => `g${i}`) }] };
    const compiled = compileRequestFhirPath('Patient.name.given ~ Patient.name.given', new RequestFhirPathBudget());
    expect(() => compiled(many)).toThrow(/at most 1000 items/);
  });

  it('bounds the length and the nesting of the expression', () => {
    expect(refusal('Patient.name' + '.given'.repeat(200)).code).toBe('fhirpath-too-complex');
    expect(refusal('('.repeat(40) + 'Patient' + ')'.repeat(40)).code).toBe('fhirpath-too-complex');
  });

  it('stops an evaluation that builds huge strings before building them', () => {
    const forty = `'${'a'.repeat(40)}'`;
    const error = refusal(`${forty}${`.replace('', ${forty})`.repeat(5)}.length()`);
    expect(error.code).toBe('fhirpath-too-costly');
    expect(error.status).toBe(422);
  });

  it('charges every step to one budget per request', () => {
    const budget = new RequestFhirPathBudget({ ...REQUEST_FHIRPATH_LIMITS, maxSteps: 200 });
    expect(refusal("Patient.name.where(family.matches('(a+)+$'))", budget).code).toBe('fhirpath-too-costly');
  });

  it('a syntax error is a 400 bad request', () => {
    expect(refusal('Patient.name.where(').code).toBe('bad-request');
  });
});
