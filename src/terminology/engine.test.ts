import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import type { CodeSystemResource, ValueSetResource } from '../definitions/terminology.js';
import { LIMITS, TerminologyEngine } from './engine.js';

const SHAPES: CodeSystemResource = {
  resourceType: 'CodeSystem',
  url: 'http://example.org/shapes',
  version: '1',
  name: 'Shapes',
  content: 'complete',
  concept: [
    {
      code: 'shape',
      display: 'Shape',
      concept: [
        {
          code: 'polygon',
          display: 'Polygon',
          concept: [
            { code: 'triangle', display: 'Triangle' },
            { code: 'square', display: 'Square', designation: [{ language: 'fr', value: 'Carré' }] },
          ],
        },
        { code: 'circle', display: 'Circle', property: [{ code: 'round', valueBoolean: true }] },
      ],
    },
    // A hierarchy by property rather than nesting.
    { code: 'oval', display: 'Oval', property: [{ code: 'parent', valueCode: 'shape' }] },
  ],
};

function engine(valueSets: ValueSetResource[] = [], codeSystems: CodeSystemResource[] = [SHAPES]) {
  return new TerminologyEngine({
    valueSets: async (url) => valueSets.filter((vs) => vs.url === url),
    codeSystems: async (url) => codeSystems.filter((cs) => cs.url === url),
  });
}

const vs = (url: string, compose: ValueSetResource['compose']): ValueSetResource => ({
  resourceType: 'ValueSet',
  url,
  compose,
});

async function codes(e: TerminologyEngine, set: ValueSetResource): Promise<string[]> {
  return [...(await e.expandAll(set)).values()].map((c) => c.code).sort();
}

async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe('TerminologyEngine.expand', () => {
  const S = SHAPES.url!;

  it('expands a whole code system, with displays and the hierarchy flattened', async () => {
    const all = await codes(engine(), vs('urn:all', { include: [{ system: S }] }));
    expect(all).toEqual(['circle', 'oval', 'polygon', 'shape', 'square', 'triangle']);
  });

  it('takes listed concepts, excludes, and filters is-a, descendent-of, is-not-a, =, regex', async () => {
    const e = engine();
    expect(await codes(e, vs('urn:a', { include: [{ system: S, concept: [{ code: 'circle' }] }] }))).toEqual([
      'circle',
    ]);
    const isA = vs('urn:b', {
      include: [{ system: S, filter: [{ property: 'concept', op: 'is-a', value: 'polygon' }] }],
    });
    expect(await codes(e, isA)).toEqual(['polygon', 'square', 'triangle']);
    const below = { include: [{ system: S, filter: [{ property: 'concept', op: 'descendent-of', value: 'shape' }] }] };
    expect(await codes(e, vs('urn:c', below))).toEqual(['circle', 'oval', 'polygon', 'square', 'triangle']);
    const notA = { include: [{ system: S, filter: [{ property: 'concept', op: 'is-not-a', value: 'polygon' }] }] };
    expect(await codes(e, vs('urn:d', notA))).toEqual(['circle', 'oval', 'shape']);
    const eq = { include: [{ system: S, filter: [{ property: 'round', op: '=', value: 'true' }] }] };
    expect(await codes(e, vs('urn:e', eq))).toEqual(['circle']);
    const regex = { include: [{ system: S, filter: [{ property: 'code', op: 'regex', value: '[st].*e' }] }] };
    expect(await codes(e, vs('urn:f', regex))).toEqual(['shape', 'square', 'triangle']);
    const excluded = {
      include: [{ system: S }],
      exclude: [{ system: S, filter: [{ property: 'concept', op: 'is-a', value: 'polygon' }] }],
    };
    expect(await codes(e, vs('urn:g', excluded))).toEqual(['circle', 'oval', 'shape']);
  });

  it('intersects nested value sets with the system part, and a stored one wins over none', async () => {
    const polygons = vs('urn:polygons', {
      include: [{ system: S, filter: [{ property: 'concept', op: 'is-a', value: 'polygon' }] }],
    });
    const e = engine([polygons]);
    const nested = vs('urn:n', { include: [{ valueSet: ['urn:polygons'] }] });
    expect(await codes(e, nested)).toEqual(['polygon', 'square', 'triangle']);
    const both = vs('urn:m', {
      include: [{ system: S, concept: [{ code: 'square' }, { code: 'circle' }], valueSet: ['urn:polygons'] }],
    });
    expect(await codes(e, both)).toEqual(['square']);
  });

  it('pages, filters by text and echoes the parameters', async () => {
    const result = await engine().expand(vs('urn:all', { include: [{ system: S }] }), {
      filter: 'SQU',
      offset: 0,
      count: 10,
      parameters: [{ name: 'filter', valueString: 'SQU' }],
    });
    expect(result.expansion).toMatchObject({
      total: 1,
      offset: 0,
      parameter: [{ name: 'filter', valueString: 'SQU' }],
      contains: [{ system: S, code: 'square', display: 'Square' }],
    });
    const page = await engine().expand(vs('urn:all', { include: [{ system: S }] }), { offset: 4, count: 10 });
    expect(page.expansion).toMatchObject({ total: 6, offset: 4 });
    expect((page.expansion as { contains: unknown[] }).contains).toHaveLength(2);
  });

  it('refuses a cycle of nested value sets and a nesting past the depth bound', async () => {
    const a = vs('urn:a', { include: [{ valueSet: ['urn:b'] }] });
    const b = vs('urn:b', { include: [{ valueSet: ['urn:a'] }] });
    const cycle = await refusal(engine([a, b]).expandAll(a));
    expect(cycle.code).toBe('expansion-too-costly');
    expect(cycle.message).toContain('urn:a');
    const chain = Array.from({ length: LIMITS.maxDepth + 2 }, (_, i) =>
      vs(`urn:d${i}`, { include: [i === LIMITS.maxDepth + 1 ? { system: S } : { valueSet: [`urn:d${i + 1}`] }] }),
    );
    const deep = await refusal(engine(chain).expandAll(chain[0]!));
    expect(deep.code).toBe('expansion-too-costly');
    expect(deep.message).toContain(`deeper than ${LIMITS.maxDepth}`);
  });

  it('refuses an expansion past the size bound', async () => {
    const big: CodeSystemResource = {
      resourceType: 'CodeSystem',
      url: 'urn:big',
      content: 'complete',
      concept: Array.from({ length: LIMITS.maxExpansion + 1 }, (_, i) => ({ code: `c${i}` })),
    };
    const error = await refusal(engine([], [big]).expandAll(vs('urn:big-vs', { include: [{ system: 'urn:big' }] })));
    expect(error.code).toBe('expansion-too-costly');
    expect(error.message).toContain('urn:big-vs');
  });

  it('refuses what needs an external terminology, naming the value set', async () => {
    const snomed = vs('urn:snomed-vs', {
      include: [
        { system: 'http://snomed.info/sct', filter: [{ property: 'concept', op: 'is-a', value: '404684003' }] },
      ],
    });
    const error = await refusal(engine().expandAll(snomed));
    expect(error.code).toBe('terminology-not-supported');
    expect(error.message).toContain('urn:snomed-vs');
    expect(error.message).toContain('http://snomed.info/sct');
  });

  it('refuses a regex it will not run, and charges regex steps to a budget', async () => {
    const backref = { include: [{ system: S, filter: [{ property: 'code', op: 'regex', value: '(a)\\1' }] }] };
    expect((await refusal(engine().expandAll(vs('urn:r', backref)))).code).toBe('terminology-not-supported');
    const saved = LIMITS.regexSteps;
    LIMITS.regexSteps = 10;
    try {
      const costly = { include: [{ system: S, filter: [{ property: 'display', op: 'regex', value: '.*' }] }] };
      expect((await refusal(engine().expandAll(vs('urn:r2', costly)))).code).toBe('expansion-too-costly');
    } finally {
      LIMITS.regexSteps = saved;
    }
  });

  it('refuses an expansion that visits too many codes', async () => {
    const many = vs('urn:many', { include: Array.from({ length: 20 }, () => ({ system: S })) });
    expect(await codes(engine(), many)).toHaveLength(6);
    const saved = LIMITS.maxWork;
    LIMITS.maxWork = 100;
    try {
      const error = await refusal(engine().expandAll(many));
      expect(error.code).toBe('expansion-too-costly');
      expect(error.message).toContain('more than 100 codes');
    } finally {
      LIMITS.maxWork = saved;
    }
  });

  it('expands the R4 value sets it holds', async () => {
    const e = engine([], []);
    const gender = await e.requireValueSet('http://hl7.org/fhir/ValueSet/administrative-gender');
    expect(await codes(e, gender)).toEqual(['female', 'male', 'other', 'unknown']);
    // A v3 hierarchy, by nesting.
    const actCode = await e.requireValueSet('http://terminology.hl7.org/ValueSet/v3-ActEncounterCode');
    expect(await codes(e, actCode)).toContain('AMB');
  });
});

describe('TerminologyEngine validation and lookup', () => {
  const S = SHAPES.url!;
  const polygons = vs('urn:polygons', {
    include: [{ system: S, filter: [{ property: 'concept', op: 'is-a', value: 'polygon' }] }],
  });

  it('validates codings in a value set, with the display', async () => {
    const e = engine();
    expect((await e.validateInValueSet(polygons, [{ system: S, code: 'square' }])).parameter).toEqual([
      { name: 'result', valueBoolean: true },
      { name: 'display', valueString: 'Square' },
    ]);
    const outside = await e.validateInValueSet(polygons, [{ system: S, code: 'circle' }]);
    expect(outside.parameter[0]).toEqual({ name: 'result', valueBoolean: false });
    expect(outside.parameter[1]).toMatchObject({ name: 'message' });
    const wrongDisplay = await e.validateInValueSet(polygons, [{ system: S, code: 'square', display: 'Box' }]);
    expect(wrongDisplay.parameter[0]).toEqual({ name: 'result', valueBoolean: false });
    // A CodeableConcept: one coding in is enough.
    const any = await e.validateInValueSet(polygons, [
      { system: S, code: 'circle' },
      { system: S, code: 'triangle' },
    ]);
    expect(any.parameter[0]).toEqual({ name: 'result', valueBoolean: true });
  });

  it('validates in a code system and looks codes up with designations and the hierarchy', async () => {
    const e = engine();
    const cs = await e.requireCodeSystem(S);
    expect((await e.validateInCodeSystem(cs, [{ code: 'oval' }])).parameter[0]).toEqual({
      name: 'result',
      valueBoolean: true,
    });
    expect((await e.validateInCodeSystem(cs, [{ code: 'hexagon' }])).parameter[0]).toEqual({
      name: 'result',
      valueBoolean: false,
    });
    const square = e.lookup(cs, 'square');
    expect(square.parameter).toEqual([
      { name: 'name', valueString: 'Shapes' },
      { name: 'version', valueString: '1' },
      { name: 'display', valueString: 'Square' },
      {
        name: 'designation',
        part: [
          { name: 'language', valueCode: 'fr' },
          { name: 'value', valueString: 'Carré' },
        ],
      },
      {
        name: 'property',
        part: [
          { name: 'code', valueCode: 'parent' },
          { name: 'value', valueCode: 'polygon' },
        ],
      },
    ]);
    const shape = e.lookup(cs, 'shape', ['child']);
    const children = shape.parameter.filter((p) => p.name === 'property').map((p) => (p.part as any[])[1].valueCode);
    expect(children.sort()).toEqual(['circle', 'oval', 'polygon']);
    expect((await refusal(Promise.resolve().then(() => e.lookup(cs, 'hexagon')))).code).toBe('terminology-not-found');
    expect((await refusal(e.requireCodeSystem('http://snomed.info/sct'))).code).toBe('terminology-not-supported');
  });
});
