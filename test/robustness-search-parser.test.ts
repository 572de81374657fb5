// Property-based tests of the search pipeline without a database (fast-check): random and hostile
// queries through parse (src/search/parse.ts) → plan (plan.ts) → SQL (sql/compile.ts) either end in
// a 4xx AppError or in SQL whose every value is a bound parameter, quickly, whatever the input.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../src/definitions/registry.js';
import { AppError } from '../src/errors.js';
import { createSearchCatalog } from '../src/search/engine.js';
import { parseParamKey, parseSearch } from '../src/search/parse.js';
import type { SearchRequest } from '../src/search/parse.js';
import { planSearch } from '../src/search/plan.js';
import type { Plan } from '../src/search/plan.js';
import { compileCount, compileSearch } from '../src/search/sql/compile.js';
import { postgresDialect, sqliteDialect } from '../src/storage/sql/dialect.js';
import type { Dialect } from '../src/storage/sql/dialect.js';
import { GARBAGE_MODIFIERS, GARBAGE_SEARCH_VALUES, runs } from './support/robustness.js';

const registry = loadR4Definitions();
const catalog = createSearchCatalog(registry, 'http://fhir.test/fhir');
const TYPES = registry.resourceTypes;
const RESULT_PARAMS = [
  '_sort',
  '_count',
  '_include',
  '_revinclude',
  '_include:iterate',
  '_revinclude:iterate',
  '_include:bogus',
  '_elements',
  '_summary',
  '_total',
  '_cursor',
  '_type',
  '_format',
  '_pretty',
  '_sort:desc',
  '_has',
  '_has:',
  '_has:Observation',
];
/** A value marker: if it ever shows up in SQL text, a value was spliced into the statement. */
const MARKER = 'zqxmarkerqz';

const codesOf = (type: string) => registry.searchParameters(type).map((p) => p.code);
const referenceCodesOf = (type: string) =>
  registry
    .searchParameters(type)
    .filter((p) => p.type === 'reference')
    .map((p) => p.code);

function arbitraryName(type: string): fc.Arbitrary<string> {
  const codes = codesOf(type);
  const refs = referenceCodesOf(type);
  const anyCode = fc.constantFrom(...codes);
  const target = fc.constantFrom(...TYPES);
  const options: fc.Arbitrary<string>[] = [
    anyCode,
    anyCode,
    fc.tuple(anyCode, fc.constantFrom(...GARBAGE_MODIFIERS)).map(([c, m]) => `${c}:${m}`),
    fc
      .tuple(
        target,
        fc.constantFrom('subject', 'patient', 'code', 'x', ''),
        fc.constantFrom('name', 'code', '_id', 'x', ''),
      )
      .map(([t, r, c]) => `_has:${t}:${r}:${c}`),
    fc.constantFrom(...RESULT_PARAMS),
    fc.string({ maxLength: 20 }),
    fc.string({ unit: 'binary', maxLength: 10 }),
  ];
  if (refs.length > 0) {
    const ref = fc.constantFrom(...refs);
    options.push(
      fc
        .tuple(ref, fc.constantFrom('name', 'identifier', 'code', '_id', 'birthdate', 'x', ''))
        .map(([r, c]) => `${r}.${c}`),
      fc
        .tuple(ref, target, fc.constantFrom('name', 'identifier', '_id', '_lastUpdated'))
        .map(([r, t, c]) => `${r}:${t}.${c}`),
      fc.tuple(ref, fc.integer({ min: 2, max: 12 })).map(([r, n]) => `${`${r}.`.repeat(n)}_id`),
    );
  }
  return fc.oneof(...options);
}

const PREFIXES = ['', 'eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap', 'sb', 'xx'];

const arbitraryValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...GARBAGE_SEARCH_VALUES),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.tuple(fc.constantFrom(...PREFIXES), fc.double()).map(([p, n]) => `${p}${n}`),
  fc.tuple(fc.constantFrom(...PREFIXES), fc.date({ noInvalidDate: true })).map(([p, d]) => `${p}${d.toISOString()}`),
  fc
    .tuple(fc.constantFrom(...PREFIXES), fc.integer({ min: -300_000, max: 300_000 }), fc.nat(20), fc.nat(40))
    .map(([p, y, m, d]) => `${p}${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`),
  fc.tuple(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 })).map(([s, c]) => `${s}|${c}`),
  fc
    .tuple(fc.double(), fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }))
    .map(([n, s, c]) => `${n}|${s}|${c}`),
  fc.tuple(fc.constantFrom(...TYPES, 'Nope'), fc.string({ maxLength: 10 })).map(([t, id]) => `${t}/${id}`),
  fc.array(fc.string({ maxLength: 8 }), { minLength: 2, maxLength: 6 }).map((parts) => parts.join(',')),
  fc.string({ maxLength: 10 }).map((s) => `${s}${MARKER}`),
);

const arbitraryQuery = fc.constantFrom(...TYPES).chain((type) =>
  fc.record({
    type: fc.constant(type),
    params: fc.array(fc.tuple(arbitraryName(type), arbitraryValue), { maxLength: 6 }),
    strict: fc.boolean(),
  }),
);

/** Runs one query through the pipeline; returns the SQL of both dialects, or the AppError. */
function pipeline(type: string, params: [string, string][], strict: boolean) {
  let request: SearchRequest;
  let plans: (readonly [Dialect, Plan])[];
  try {
    request = parseSearch(params);
    plans = [sqliteDialect, postgresDialect].map((dialect) => [
      dialect,
      planSearch(request, [type], {
        catalog,
        references: catalog.references,
        now: Date.now(),
        strict,
        canSearch: () => true,
        dialect,
      }),
    ]);
  } catch (error) {
    if (error instanceof AppError) return { error };
    throw error;
  }
  const statements = plans.flatMap(([dialect, plan]) => [
    compileSearch(plan, dialect, { limit: request.count + 1, inlineBytes: 65536 }),
    compileSearch(plan, dialect, { limit: 2, position: ['a', 1], backwards: true, inlineBytes: 65536 }),
    compileCount(plan, dialect),
  ]);
  return { statements };
}

function checkPipeline(type: string, params: [string, string][], strict: boolean): void {
  const started = performance.now();
  const result = pipeline(type, params, strict);
  expect(performance.now() - started, JSON.stringify(params)).toBeLessThan(1_000);
  if (result.error) {
    // 400 malformed, 403 a type the caller may not search, 422 beyond the cost limits (search/cost-limits.ts).
    expect([400, 403, 422], result.error.message).toContain(result.error.status);
    return;
  }
  for (const statement of result.statements ?? []) {
    expect(statement.text.toLowerCase()).not.toContain(MARKER);
    // Every `?` is a bound parameter and every parameter has its `?`.
    expect(statement.text.split('?').length - 1).toBe(statement.params.length);
    const unbindable = statement.params.filter(
      (value) =>
        value === undefined ||
        typeof value === 'function' ||
        typeof value === 'symbol' ||
        typeof value === 'boolean' ||
        (typeof value === 'number' && Number.isNaN(value)),
    );
    expect(unbindable).toEqual([]);
  }
}

describe('search pipeline on random queries', () => {
  it('answers every random query with a 4xx AppError or fully parameterised SQL', () => {
    fc.assert(
      fc.property(arbitraryQuery, ({ type, params, strict }) => checkPipeline(type, params, strict)),
      runs(2_000, 50_000),
    );
  });

  it('answers every parameter of every type with every garbage value', () => {
    // The quick run rotates through the garbage values (2 per parameter); the full run sends them all.
    const step = runs(2, GARBAGE_SEARCH_VALUES.length).numRuns;
    let n = 0;
    for (const type of TYPES) {
      for (const { code } of registry.searchParameters(type)) {
        for (let i = 0; i < step; i++) {
          const value = GARBAGE_SEARCH_VALUES[(n + i * 7) % GARBAGE_SEARCH_VALUES.length];
          checkPipeline(type, [[code, value]], false);
          checkPipeline(type, [[`${code}:${GARBAGE_MODIFIERS[(n + i) % GARBAGE_MODIFIERS.length]}`, value]], true);
        }
        n++;
      }
    }
    expect(n).toBeGreaterThan(3_000);
  }, 600_000);

  it('parses parameter names of any shape without anything but a 400 (or 422 for too many links)', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.stringMatching(/^[_a-z:.\-A-Z]{0,40}$/)),
        (name) => {
          try {
            parseParamKey(name);
          } catch (error) {
            expect(error).toBeInstanceOf(AppError);
            expect([400, 422]).toContain((error as AppError).status);
            if ((error as AppError).status === 422) expect((error as AppError).code).toBe('search-too-costly');
          }
        },
      ),
      runs(2_000, 50_000),
    );
  });

  it('handles long chains, _has nests and OR lists in bounded time', () => {
    const long: [string, [string, string][]][] = [
      ['chain of 1,000 links', [[`${'subject.'.repeat(1_000)}name`, 'x']]],
      ['_has nested 1,000 deep', [[`${'_has:Observation:subject:'.repeat(1_000)}code`, 'x']]],
      ['10,000 OR values', [['name', Array.from({ length: 10_000 }, (_, i) => `n${i}`).join(',')]]],
      ['10,000 token ORs', [['identifier', Array.from({ length: 10_000 }, (_, i) => `s|v${i}`).join(',')]]],
      ['1,000 AND parameters', Array.from({ length: 1_000 }, (_, i): [string, string] => ['name', `n${i}`])],
      ['1,000 sort keys', [['_sort', Array.from({ length: 1_000 }, () => 'name').join(',')]]],
      ['1,000 includes', Array.from({ length: 1_000 }, (): [string, string] => ['_include', 'Patient:organization'])],
      [
        '1,000 :iterate revincludes',
        Array.from({ length: 1_000 }, (): [string, string] => ['_revinclude:iterate', 'Observation:subject']),
      ],
    ];
    for (const [, params] of long) checkPipeline('Patient', params, false);
  });
});

// Once quadratic and unbounded: parseParamKey split the whole remaining name at every `_has` level (4,000 levels,
// a 100 KB POST _search body, blocked the event loop for seconds) and recursed once per chain link (20,000 links
// overflowed the stack). Now names, chains and nests are capped (400) before any of that.
describe('search parser: deep nests', () => {
  it('refuses a _has nest 4,000 deep (100 KB) in under a second', () => {
    checkPipeline('Patient', [[`${'_has:Observation:subject:'.repeat(4_000)}code`, 'x']], false);
  });

  it('refuses a chain of 20,000 links with a 4xx AppError', () => {
    const result = pipeline('Patient', [[`${'subject.'.repeat(20_000)}name`, 'x']], false);
    // Longer than a parameter name may be (1,000 characters): malformed before it is too costly.
    expect(result.error?.status).toBe(400);
  });
});
