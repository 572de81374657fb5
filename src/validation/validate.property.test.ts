/**
 * Property-based tests of the validator (fast-check): whatever JSON it is given, it answers with a list of
 * well-formed issues (never an exception), deterministically, without touching its input, in bounded time; and
 * its answers move the right way when a valid resource is changed (an unknown element or a corrupted value is
 * always reported, at the element's path). Heavier runs with AMBIENT_FULL_TESTS=1 (`npm run test:full`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { arbitraryJson, arbitraryResource, arbitraryResourceLike } from '../../test/support/fhir-arbitraries.js';
import { fixturesDir } from '../../test/support/fixtures.js';
import { FULL, runs } from '../../test/support/full-tests.js';
import { validateResource, type ValidationIssue } from './validate.js';

const registry = loadR4Definitions();

const ISSUE_CODES = ['structure', 'required', 'value', 'invariant', 'code-invalid', 'invalid'];

/** Every issue names a location inside the resource (or `Resource` when it has no usable type) and a rule. */
function assertWellFormed(issues: ValidationIssue[], input: unknown): void {
  expect(Array.isArray(issues)).toBe(true);
  const root =
    input !== null && typeof input === 'object' && !Array.isArray(input)
      ? (input as Record<string, unknown>).resourceType
      : undefined;
  const roots = ['Resource', ...(typeof root === 'string' && registry.isResourceType(root) ? [root] : [])];
  for (const issue of issues) {
    expect(['error', 'warning']).toContain(issue.severity);
    expect(ISSUE_CODES).toContain(issue.code);
    expect(['base', 'invariant']).toContain(issue.rule);
    expect(typeof issue.diagnostics).toBe('string');
    expect(issue.diagnostics.length).toBeGreaterThan(0);
    expect(typeof issue.expression).toBe('string');
    expect(roots.some((r) => issue.expression === r || issue.expression.startsWith(`${r}.`))).toBe(true);
  }
}

function validateChecked(input: unknown): ValidationIssue[] {
  const before = JSON.stringify(input);
  const started = performance.now();
  const issues = validateResource(input, registry);
  // Bounded work: no input of this size may take long (a regex or FHIRPath blow-up would show here).
  expect(performance.now() - started).toBeLessThan(2_000);
  expect(JSON.stringify(input)).toBe(before); // the input is left as it was
  assertWellFormed(issues, input);
  return issues;
}

const errorsOf = (issues: ValidationIssue[]) => issues.filter((i) => i.severity === 'error');
const key = (i: ValidationIssue) => `${i.expression} ${i.code} ${i.diagnostics}`;

describe('validator on arbitrary input', () => {
  it('answers any JSON value with well-formed issues', () => {
    fc.assert(
      fc.property(arbitraryJson(), (value) => {
        const issues = validateChecked(value);
        // Anything that is not an object with a known resourceType is refused.
        expect(errorsOf(issues).length).toBeGreaterThan(0);
      }),
      runs(300, 5_000),
    );
  });

  it('answers objects with a resourceType and random members', () => {
    fc.assert(
      fc.property(arbitraryResourceLike(registry), (value) => void validateChecked(value)),
      runs(500, 10_000),
    );
  });

  it('answers random resources shaped by the R4 rules (every type, nested, contained, with garbage)', () => {
    fc.assert(
      fc.property(arbitraryResource(registry), ({ resource }) => void validateChecked(resource)),
      runs(400, 10_000),
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(arbitraryResource(registry), ({ resource }) => {
        expect(validateResource(resource, registry)).toEqual(validateResource(structuredClone(resource), registry));
      }),
      runs(100, 2_000),
    );
  });

  it('reports every unknown element added to a resource, and nothing else changes', () => {
    fc.assert(
      fc.property(
        arbitraryResource(registry, { garbageOneIn: 1000 }),
        fc.stringMatching(/^[a-z][A-Za-z0-9]{0,10}Zz$/),
        ({ type, resource }, name) => {
          const before = validateResource(resource, registry).map(key);
          const after = validateResource({ ...resource, [name]: 'x' }, registry);
          const added = after.map(key).filter((k) => !before.includes(k));
          expect(added).toHaveLength(1);
          expect(after.find((i) => key(i) === added[0])).toMatchObject({
            expression: `${type}.${name}`,
            code: 'structure',
            severity: 'error',
          });
          expect(after).toHaveLength(before.length + 1);
        },
      ),
      runs(200, 3_000),
    );
  });

  it('leaves its input unchanged when a primitive holds an object beside its _ sibling, or the sibling has __proto__', () => {
    // @medplum/core's FHIRPath merges `_name` into the value and deletes `__proto__`/`constructor` from `_name`.
    const observation = (quantity: string) =>
      JSON.parse(`{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":${quantity}}`);
    const inputs: [input: Record<string, unknown>, expressions: string[]][] = [
      [
        observation('{"value":1,"code":{"a":1},"_code":{"id":"e1"}}'),
        ['Observation.valueQuantity.code', 'Observation.valueQuantity.code', 'Observation.valueQuantity'],
      ],
      [
        observation('{"value":1,"code":{"a":1},"_code":[{"id":"e1"}]}'),
        [
          'Observation.valueQuantity.code',
          'Observation.valueQuantity.code',
          'Observation.valueQuantity.code[0]',
          'Observation.valueQuantity',
        ],
      ],
      [
        observation('{"value":1,"code":"mg","_code":{"__proto__":{"p":1},"constructor":"c"}}'),
        [
          'Observation.valueQuantity.code.__proto__',
          'Observation.valueQuantity.code.constructor',
          'Observation.valueQuantity',
        ],
      ],
      [
        {
          resourceType: 'Patient',
          name: [{ family: 'F', period: { start: { a: 1 }, _start: { id: 's' }, end: '2020' } }],
        },
        ['Patient.name[0].period.start', 'Patient.name[0].period.start'],
      ],
    ];
    for (const [input, expressions] of inputs) {
      const issues = validateChecked(input);
      expect(issues.map((i) => i.expression)).toEqual(expressions);
      expect(issues).toEqual(validateResource(structuredClone(input), registry));
    }
  });

  it(
    'leaves its input unchanged whatever primitives and _ siblings hold',
    () => {
      fc.assert(
        fc.property(
          arbitraryResource(registry, { garbageOneIn: 1000 }),
          fc.array(fc.nat(5), { minLength: 1, maxLength: 50 }),
          ({ resource }, picks) => void validateChecked(withPrimitiveHazards(resource, picks)),
        ),
        runs(300, 5_000),
      );
      // 5,000 runs take about 40 s alone and more beside the other test files of a full run.
    },
    FULL ? 300_000 : undefined,
  );
});

/** The sibling that @medplum/core's FHIRPath deletes members from: built by JSON.parse, as a request body is. */
const HAZARDOUS_SIBLING = '{"id":"e","__proto__":{"p":1},"constructor":"c"}';

/**
 * A copy of `resource` in which some primitives (picked by `picks`, used in turn) hold JSON objects and get a
 * `_name` sibling, some of whose members the FHIRPath engine would delete.
 */
function withPrimitiveHazards(resource: Record<string, unknown>, picks: number[]): Record<string, unknown> {
  let turn = 0;
  const pick = () => picks[turn++ % picks.length];
  const isPrimitive = (v: unknown) => v !== null && typeof v !== 'object';
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(visit);
    if (value === null || typeof value !== 'object') return;
    const object = value as Record<string, unknown>;
    for (const [name, child] of Object.entries(object)) {
      if (name === 'resourceType' || name.startsWith('_')) {
        visit(child);
        continue;
      }
      const primitives = Array.isArray(child) && child.every(isPrimitive);
      if (!isPrimitive(child) && !primitives) {
        visit(child);
        continue;
      }
      const choice = pick();
      if (choice === 0) continue;
      const sibling = () => (choice % 2 ? JSON.parse(HAZARDOUS_SIBLING) : { id: 'e' });
      if (Array.isArray(child)) {
        object[name] = child.map((item, i) => (choice > 2 && i === 0 ? { a: 1 } : item));
        object[`_${name}`] = child.map(sibling);
      } else {
        if (choice > 2) object[name] = { a: 1 };
        object[`_${name}`] = sibling();
      }
    }
  };
  const copy = JSON.parse(JSON.stringify(resource)) as Record<string, unknown>;
  visit(copy);
  return copy;
}

describe('validator on deep and large input', () => {
  it('handles extensions nested as deep as the body parser lets them', () => {
    // Each extension level is two JSON levels (the array and the object): 30 levels stay under the 64 limit.
    let extension: Record<string, unknown> = { url: 'http://example.org/leaf', valueString: 'leaf' };
    for (let i = 0; i < 30; i++) extension = { url: `http://example.org/e${i}`, extension: [extension] };
    const issues = validateChecked({ resourceType: 'Patient', extension: [extension] });
    expect(errorsOf(issues)).toEqual([]);
  });

  it('handles recursive backbone elements (Questionnaire.item.item...)', () => {
    let item: Record<string, unknown> = { linkId: 'leaf', type: 'string', text: 'leaf' };
    for (let i = 0; i < 30; i++) item = { linkId: `l${i}`, type: 'group', item: [item] };
    const issues = validateChecked({ resourceType: 'Questionnaire', status: 'active', item: [item] });
    expect(errorsOf(issues)).toEqual([]);
  });

  it('handles contained resources inside Bundles inside Bundles', () => {
    let bundle: Record<string, unknown> = { resourceType: 'Patient', active: true };
    for (let i = 0; i < 10; i++) bundle = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: bundle }] };
    validateChecked(bundle);
  });

  it('handles wide resources (10,000 names, 100,000 given names) in bounded time', () => {
    const names = Array.from({ length: 10_000 }, (_, i) => ({ family: `F${i}`, given: ['a', 'b'] }));
    expect(errorsOf(validateChecked({ resourceType: 'Patient', name: names }))).toEqual([]);
    const given = Array.from({ length: 100_000 }, (_, i) => `G${i}`);
    expect(errorsOf(validateChecked({ resourceType: 'Patient', name: [{ given }] }))).toEqual([]);
  });

  it('refuses a string over 1 MB (the R4 limit) and huge or non-finite numbers', () => {
    const big = validateChecked({ resourceType: 'Patient', name: [{ family: 'x'.repeat(1024 * 1024 + 1) }] });
    expect(errorsOf(big).map((i) => i.expression)).toEqual(['Patient.name[0].family']);
    for (const value of [Infinity, -Infinity, NaN]) {
      const issues = validateChecked({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        valueQuantity: { value },
      });
      expect(errorsOf(issues).map((i) => i.expression)).toEqual(['Observation.valueQuantity.value']);
    }
    for (const value of [2147483648, -2147483649, 1e20, 1.5]) {
      const issues = validateChecked({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        valueInteger: value,
      });
      expect(errorsOf(issues).map((i) => i.expression)).toEqual(['Observation.valueInteger']);
    }
  });

  it('rejects regex-hostile strings quickly (no catastrophic backtracking in the primitive patterns)', () => {
    const hostile = ['1'.repeat(50_000) + 'x', '2020-'.repeat(10_000), ' '.repeat(100_000) + 'x', 'a '.repeat(50_000)];
    for (const value of hostile) {
      validateChecked({
        resourceType: 'Patient',
        birthDate: value,
        gender: value,
        language: value,
        id: value.slice(0, 5000),
      });
      validateChecked({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        valueTime: value,
        issued: value,
      });
      validateChecked({ resourceType: 'Binary', contentType: value, data: value });
    }
  });
});

describe('validator against the R4 examples, corrupted', () => {
  const examples = gunzipSync(readFileSync(join(fixturesDir(), 'r4-spec-examples', 'all-r4-examples.ndjson.gz')))
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((resource) => errorsOf(validateResource(resource, registry)).length === 0);

  /** Paths of every string leaf below the root (not resourceType), in the validator's notation. */
  function stringLeaves(
    value: unknown,
    path: string,
    out: { path: (string | number)[]; expression: string }[],
    at: (string | number)[] = [],
  ) {
    if (Array.isArray(value)) {
      value.forEach((item, i) => stringLeaves(item, `${path}[${i}]`, out, [...at, i]));
    } else if (value !== null && typeof value === 'object') {
      for (const [name, child] of Object.entries(value)) {
        if (name === 'resourceType' || name.startsWith('_')) continue;
        stringLeaves(child, `${path}.${name}`, out, [...at, name]);
      }
    } else if (typeof value === 'string') out.push({ path: at, expression: path });
  }

  it('reports a string value replaced by a number at exactly that element', () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), (exampleIndex, leafIndex) => {
        const example = structuredClone(examples[exampleIndex % examples.length]);
        const leaves: { path: (string | number)[]; expression: string }[] = [];
        stringLeaves(example, example.resourceType as string, leaves);
        if (leaves.length === 0) return;
        const leaf = leaves[leafIndex % leaves.length];
        let parent: Record<string | number, unknown> = example;
        for (const step of leaf.path.slice(0, -1)) parent = parent[step] as Record<string | number, unknown>;
        parent[leaf.path[leaf.path.length - 1]] = 42;
        const errors = errorsOf(validateChecked(example));
        expect(errors.map((e) => e.expression)).toContain(leaf.expression);
      }),
      runs(300, 5_000),
    );
  });

  it('reports a required element removed from a valid example', () => {
    fc.assert(
      fc.property(fc.nat(), (exampleIndex) => {
        const example = structuredClone(examples[exampleIndex % examples.length]);
        const type = example.resourceType as string;
        const required = Object.entries(registry.type(type)?.elements ?? {}).filter(
          ([path, rule]) => !path.includes('.') && (rule.min ?? 0) > 0,
        );
        if (required.length === 0) return;
        const [path, rule] = required[exampleIndex % required.length];
        const names = rule.choice
          ? Object.keys(example).filter((k) => k.startsWith(path.replace('[x]', '')))
          : [path, `_${path}`];
        for (const name of names) delete example[name];
        const errors = errorsOf(validateChecked(example));
        expect(errors.map((e) => [e.expression, e.code])).toContainEqual([`${type}.${path}`, 'required']);
      }),
      runs(200, 2_459),
    );
  });
});
