import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { validateResource } from '../validation/validate.js';
import type { ValidationIssue } from '../validation/validate.js';
import { ValidationPool } from './validation-pool.js';

describe('ValidationPool', () => {
  let pool: ValidationPool;
  const registry = loadR4Definitions();
  const calls: unknown[] = [];
  const inline = (resource: unknown): ValidationIssue[] => {
    calls.push(resource);
    return validateResource(resource, registry);
  };
  beforeAll(() => {
    pool = new ValidationPool(1);
  });
  afterAll(async () => {
    await pool.close();
  });

  const valid = { resourceType: 'Patient', id: 'p1', gender: 'female' };
  const invalid = { resourceType: 'Patient', id: 'p2', gender: 'none-of-these' };

  it('answers a resource the worker validated with its verdict, and validates anything else on the spot', async () => {
    const validate = pool.validateWith(inline);
    // Spaces in the line: the verdict is keyed by the parsed resource, not by the line's spelling.
    const keys = await pool.prevalidate([JSON.stringify(valid, null, 1), JSON.stringify(invalid), 'not json']);
    expect(keys).toHaveLength(2);
    calls.length = 0;
    expect(validate(structuredClone(valid))).toEqual([]);
    const issues = validate(structuredClone(invalid));
    expect(issues).toEqual(validateResource(invalid, registry));
    expect(issues.some((issue) => issue.severity === 'error' && issue.expression.includes('gender'))).toBe(true);
    expect(calls).toEqual([]);
    // Changed after the worker saw it (as a transaction rewrites a reference): validated here.
    const changed = { ...valid, gender: 'nonsense' };
    expect(validate(changed).length).toBeGreaterThan(0);
    expect(calls).toEqual([changed]);
    pool.release(keys);
  });

  it('never answers with a verdict for a text that holds null: an infinite number is written so', async () => {
    // JSON.parse('1e400') is Infinity, which JSON.stringify writes as null: the worker keys its verdict on
    // this line by a text that also stands for a null, which the resource does not hold.
    const line = '{"resourceType":"Patient","id":"inf","multipleBirthInteger":1e400}';
    const infinite = JSON.parse(line) as unknown;
    const keys = await pool.prevalidate([line]);
    expect(keys).toEqual([JSON.stringify(infinite)]);
    const validate = pool.validateWith(inline);
    calls.length = 0;
    const issues = validate(infinite);
    expect(calls).toEqual([infinite]);
    expect(issues.some((issue) => issue.severity === 'error' && issue.expression.includes('multipleBirth'))).toBe(true);
    pool.release(keys);
  });

  it('checks absolute references on the server base as the write path does, given the base', async () => {
    const base = 'https://fhir.example/fhir';
    const withBase = new ValidationPool(1, base);
    try {
      const mistyped = { resourceType: 'Encounter', status: 'planned', class: { code: 'AMB' } };
      const lines = [`http://fhir.example/fhir/Condition/c1`, `${base}/Condition/c1`].map((reference) =>
        JSON.stringify({ ...mistyped, partOf: { reference } }),
      );
      const keys = await withBase.prevalidate(lines);
      expect(keys).toHaveLength(2);
      const validate = withBase.validateWith(() => {
        throw new Error('validated on the writer: the worker gave no verdict');
      });
      for (const line of lines) {
        expect(validate(JSON.parse(line))).toEqual([
          expect.objectContaining({
            expression: 'Encounter.partOf.reference',
            diagnostics: expect.stringContaining('reference to a Condition is not allowed here'),
          }),
        ]);
      }
      withBase.release(keys);
    } finally {
      await withBase.close();
    }
  });

  it('uses a verdict once, and forgets released ones', async () => {
    const validate = pool.validateWith(inline);
    const keys = await pool.prevalidate([JSON.stringify(valid), JSON.stringify(invalid)]);
    calls.length = 0;
    validate(structuredClone(valid));
    validate(structuredClone(valid));
    expect(calls).toHaveLength(1);
    pool.release(keys);
    validate(structuredClone(invalid));
    expect(calls).toHaveLength(2);
  });

  it('answers no verdicts once its worker is gone (the writer validates), instead of waiting for it', async () => {
    const lonely = new ValidationPool(1);
    try {
      expect(await lonely.prevalidate([JSON.stringify(valid)])).toHaveLength(1);
      const { workers } = lonely as unknown as { workers: { terminate(): Promise<void> }[] };
      await workers[0].terminate();
      expect(await lonely.prevalidate([JSON.stringify(invalid)])).toEqual([]);
      expect(await lonely.prevalidate([JSON.stringify(invalid)])).toEqual([]);
    } finally {
      await lonely.close();
    }
  });

  it('validates rewritten resources ahead, sharing them between the workers and its own thread', async () => {
    const shared = new ValidationPool(1);
    try {
      // The worker is not started yet: this thread validates them all rather than wait for it.
      const early = [{ ...valid, id: 'early' }];
      calls.length = 0;
      const forgetEarly = await shared.prevalidateResources(early, inline);
      expect(calls).toEqual(early);
      forgetEarly();
      await shared.prevalidate([JSON.stringify(valid)]); // waits for the worker to be ready
      // This thread slowed down, so that the worker takes a share: it works from the front, this thread
      // from the back, until they meet.
      const slow = (resource: unknown) => {
        const until = performance.now() + 2;
        while (performance.now() < until);
        return inline(resource);
      };
      // Enough that the worker cannot take them all before this thread begins, even on a loaded machine
      // (with 200, a CI run once saw it do so).
      const total = 1000;
      const resources = Array.from({ length: total }, (_, i) => ({ ...(i % 2 ? invalid : valid), id: `r${i}` }));
      calls.length = 0;
      const forget = await shared.prevalidateResources(resources, slow);
      expect(calls.length).toBeGreaterThan(0);
      expect(calls.length).toBeLessThan(total);
      expect([...calls].reverse()).toEqual(resources.slice(total - calls.length));
      const validate = shared.validateWith(inline);
      calls.length = 0;
      const answers = resources.map((resource) => validate(structuredClone(resource)));
      expect(calls).toEqual([]);
      expect(answers).toEqual(resources.map((resource) => validateResource(resource, registry)));
      expect(answers.filter((issues) => issues.length > 0)).toHaveLength(total / 2);
      // Changed since: validated again. Forgotten: validated again.
      expect(validate({ ...resources[0], gender: 'nonsense' }).length).toBeGreaterThan(0);
      expect(calls).toHaveLength(1);
      forget();
      validate(structuredClone(resources[2]));
      expect(calls).toHaveLength(2);
    } finally {
      await shared.close();
    }
  });
});
