// Robustness of search and history through HTTP on both databases: every search parameter of every
// R4 type with garbage values and modifiers, hostile result parameters (_sort, _include, _cursor...),
// long chains and OR lists, tampered paging links, and random queries (fast-check), by GET and by
// POST _search, against a database holding one R4 example of every type. Every answer is a 200
// searchset Bundle or a 4xx OperationOutcome, never a 500.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../src/definitions/registry.js';
import { BACKENDS } from './support/databases.js';
import { fixturesDir } from './support/fixtures.js';
import type { TestApp } from './support/test-app.js';
import { validateResource } from '../src/validation/validate.js';
import {
  answerProblem,
  describeRequest,
  expectAnswered,
  expectClientError,
  FULL,
  GARBAGE_MODIFIERS,
  GARBAGE_SEARCH_VALUES,
  runs,
  startRobustnessApp,
  summariseProblems,
} from './support/robustness.js';
import type { FhirClient } from './support/fhir-client.js';

const registry = loadR4Definitions();
const TYPES = registry.resourceTypes;

/** One valid R4 example of every type that has one (141 types), so searches meet real index rows. */
function examplePerType(): Record<string, unknown>[] {
  const lines = gunzipSync(readFileSync(join(fixturesDir(), 'r4-spec-examples', 'all-r4-examples.ndjson.gz')))
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim());
  const byType = new Map<string, Record<string, unknown>>();
  for (const line of lines) {
    const resource = JSON.parse(line) as Record<string, unknown>;
    const type = resource.resourceType as string;
    if (byType.has(type) || typeof resource.id !== 'string') continue;
    if (validateResource(resource, registry).some((i) => i.severity === 'error')) continue;
    // A rest-hook names an endpoint the server must be configured to call: the example's own channel
    // becomes a websocket, its criteria and the rest stay.
    if (type === 'Subscription') resource.channel = { type: 'websocket' };
    byType.set(type, resource);
  }
  return [...byType.values()];
}

const form = (pairs: [string, string][]) => new URLSearchParams(pairs).toString();
const ors = (n: number, value: (i: number) => string) => Array.from({ length: n }, (_, i) => value(i)).join(',');
const ands = (n: number, name: string, value: (i: number) => string) =>
  Array.from({ length: n }, (_, i): [string, string] => [name, value(i)]);

describe.each(BACKENDS)('robustness of search on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;

  beforeAll(async () => {
    t = await startRobustnessApp(backend);
    fhir = await t.client();
    for (const resource of examplePerType()) {
      const res = await fhir.put(`/fhir/${resource.resourceType as string}/${resource.id as string}`, resource);
      expect(res.statusCode, res.body.slice(0, 300)).toBeLessThan(300);
    }
  }, 120_000);
  afterAll(async () => t?.close());

  const send = (path: string, query: string, via: 'GET' | 'POST', headers: Record<string, string>) =>
    via === 'GET' ? fhir.get(`${path}?${query}`, headers) : fhir.postForm(`${path}/_search`, query, headers);

  /** GET (or POST _search, as a form) of one query; checks the answer and returns it. */
  const search = async (path: string, pairs: [string, string][], via: 'GET' | 'POST' = 'GET', headers = {}) => {
    const query = form(pairs);
    const res = await send(path, query, via, headers);
    const request = describeRequest(
      via,
      via === 'GET' ? `${path}?${query}` : `${path}/_search`,
      via === 'POST' ? query : undefined,
    );
    expectAnswered(res, request);
    if (res.statusCode === 200) {
      const bundle = res.json() as {
        resourceType: string;
        type: string;
        entry?: { resource?: { resourceType: string } }[];
      };
      expect(bundle.resourceType, request).toBe('Bundle');
      expect(['searchset', 'history'], request).toContain(bundle.type);
    }
    return res;
  };

  /** Like search(), but collects what is wrong instead of failing on the first problem. */
  const probe = async (
    path: string,
    pairs: [string, string][],
    problems: string[],
    via: 'GET' | 'POST' = 'GET',
    headers = {},
  ) => {
    const query = form(pairs);
    const res = await send(path, query, via, headers);
    const problem = answerProblem(res, `${via} ${path}?${query}`);
    if (problem) problems.push(problem);
    return res;
  };

  it('refuses a search value holding U+0000 with a 400', async () => {
    // (PostgreSQL cannot bind U+0000 in text: before the search engine refused it, this was a 500.)
    for (const url of ['/fhir/Patient?name=a%00b', '/fhir/Patient?_id=%00', '/fhir/Observation?code=a%00|b']) {
      expectClientError(await fhir.get(url), `GET ${url}`, [400]);
    }
  });

  it('answers every search parameter of every type with garbage values and modifiers', async () => {
    // Quick run: each parameter gets one garbage value (rotating through the whole list: every value meets
    // the string, token, date, uri and reference parameters) and one modifier, the value by GET or POST in
    // turn. Full run: 12 values and every modifier per parameter, both ways (every value meets every
    // parameter in the database-free parser suite, robustness-search-parser.test.ts).
    const values = FULL ? 12 : 1;
    const modifiers = FULL ? GARBAGE_MODIFIERS.length : 1;
    const problems: string[] = [];
    let n = 0;
    for (const type of TYPES) {
      for (const { code } of registry.searchParameters(type)) {
        for (let i = 0; i < values; i++) {
          const value = GARBAGE_SEARCH_VALUES[(n + i * 7) % GARBAGE_SEARCH_VALUES.length];
          const via = FULL ? (['GET', 'POST'] as const) : ([n % 2 ? 'GET' : 'POST'] as const);
          for (const method of via) await probe(`/fhir/${type}`, [[code, value]], problems, method);
        }
        for (let i = 0; i < modifiers; i++) {
          const modifier = GARBAGE_MODIFIERS[(n + i) % GARBAGE_MODIFIERS.length];
          const value = GARBAGE_SEARCH_VALUES[(n * 3 + i) % GARBAGE_SEARCH_VALUES.length];
          await probe(`/fhir/${type}`, [[`${code}:${modifier}`, value]], problems, 'GET', {
            prefer: 'handling=strict',
          });
        }
        n++;
      }
    }
    expect(n).toBeGreaterThan(3_000);
    expect(summariseProblems(problems)).toEqual([]);
  }, 600_000);

  it('answers hostile result parameters', async () => {
    const pairs: [string, string][] = [];
    const referenceParams = registry.searchParameters('Patient').filter((p) => p.type === 'reference');
    for (const value of [
      ...GARBAGE_SEARCH_VALUES.slice(0, 40),
      'name',
      '-name',
      'birthdate,-_id',
      '_lastUpdated',
      '-_score',
      'identifier:text',
    ]) {
      pairs.push(
        ['_sort', value],
        ['_elements', value],
        ['_include', value],
        ['_revinclude', value],
        ['_summary', value],
      );
      pairs.push(['_total', value], ['_count', value], ['_cursor', value], ['_format', value], ['_type', value]);
      pairs.push(
        ['_contained', value],
        ['_containedType', value],
        ['_list', value],
        ['_text', value],
        ['_content', value],
      );
      pairs.push(
        ['_filter', value],
        ['_query', value],
        ['_since', value],
        ['_at', value],
        ['_id', value],
        ['_lastUpdated', value],
      );
    }
    for (const p of referenceParams) {
      pairs.push(
        ['_include', `Patient:${p.code}`],
        ['_include:iterate', `Patient:${p.code}:Nope`],
        ['_revinclude', `Observation:${p.code}`],
      );
    }
    pairs.push(
      ['_include', '*'],
      ['_revinclude', '*'],
      ['_include:iterate', '*'],
      ['_summary', 'count'],
      ['_count', '0'],
    );
    for (const [name, value] of pairs) {
      await search('/fhir/Patient', [[name, value]]);
      await search('/fhir/Patient', [[name, value]], 'POST');
      await search('/fhir', [
        ['_type', 'Patient,Observation'],
        [name, value],
      ]);
    }
    for (const [name, value] of pairs.filter(([n]) => ['_since', '_at', '_count', '_format'].includes(n))) {
      await search('/fhir/Patient/_history', [[name, value]]);
      await search('/fhir/_history', [[name, value]]);
    }
  }, 300_000);

  it('answers every parameter combined with _sort on itself and _include of every reference', async () => {
    for (const type of FULL
      ? TYPES
      : ['Patient', 'Observation', 'Encounter', 'MedicationRequest', 'Bundle', 'Questionnaire']) {
      const params = registry.searchParameters(type);
      for (const { code } of params) {
        await search(`/fhir/${type}`, [['_sort', code]]);
        await search(`/fhir/${type}`, [
          ['_sort', `-${code}`],
          [code, 'x'],
          ['_total', 'accurate'],
        ]);
      }
      for (const p of params.filter((q) => q.type === 'reference')) {
        await search(`/fhir/${type}`, [
          ['_include', `${type}:${p.code}`],
          ['_revinclude:iterate', `${type}:${p.code}`],
        ]);
        await search(`/fhir/${type}`, [
          [`${p.code}:missing`, 'true'],
          [`${p.code}.name`, 'x'],
          [`${p.code}:identifier`, 'a|b'],
        ]);
      }
    }
  }, 300_000);

  // Large queries. Each of the big ones once made the database refuse the statement (500): SQLite's expression
  // depth (1,000) and variable limits, PostgreSQL's 65,535 bound parameters and 1,664 columns. The engine now
  // caps parameters, OR values and name lengths (400) first.
  const LARGE: { name: string; pairs: () => [string, string][] }[] = [
    { name: 'a chain of 50 links', pairs: () => [[`${'subject.'.repeat(50)}name`, 'x']] },
    { name: 'a chain of 1,000 links', pairs: () => [[`${'general-practitioner.'.repeat(1_000)}name`, 'x']] },
    {
      name: 'typed chains',
      pairs: () => [
        ['general-practitioner:Practitioner.name', 'x'],
        ['organization:Nope.name', 'x'],
      ],
    },
    { name: 'a _has nest 50 deep', pairs: () => [[`${'_has:Observation:subject:'.repeat(50)}code`, 'x']] },
    { name: '100 OR names', pairs: () => [['name', ors(100, (i) => `n${i}`)]] },
    { name: '1,000 OR ids', pairs: () => [['_id', ors(1_000, (i) => `id${i}`)]] },
    { name: '500 AND names', pairs: () => ands(500, 'name', (i) => `n${i}`) },
    { name: '200 sort keys', pairs: () => [['_sort', ors(200, (i) => (i % 2 ? '_lastUpdated' : '-birthdate'))]] },
    { name: '500 :iterate includes', pairs: () => ands(500, '_include:iterate', () => 'Patient:general-practitioner') },
    { name: '500 OR names', pairs: () => [['name', ors(500, (i) => `n${i}`)]] },
    { name: '1,000 OR identifiers', pairs: () => [['identifier', ors(1_000, (i) => `s|v${i}`)]] },
    {
      name: '1,000 OR birthdates',
      pairs: () => [['birthdate', ors(1_000, (i) => `ge19${String(i % 100).padStart(2, '0')}`)]],
    },
    { name: '2,000 AND names', pairs: () => ands(2_000, 'name', (i) => `n${i}`) },
    { name: '40,000 OR names', pairs: () => [['name', ors(40_000, (i) => `n${i}`)]] },
    { name: '100,000 OR ids', pairs: () => [['_id', ors(100_000, (i) => `id${i}`)]] },
    {
      name: '2,000 sort keys',
      pairs: () => [['_sort', ors(2_000, () => 'birthdate')]],
    },
  ];
  for (const large of LARGE) {
    it(`answers ${large.name} without a server error`, async () => {
      await search('/fhir/Patient', large.pairs(), 'POST');
    });
  }

  it('answers tampered and foreign paging links with 400, and follows real ones to the end', async () => {
    for (let i = 0; i < 30; i++) {
      await fhir.post('/fhir/Basic', { resourceType: 'Basic', code: { text: `page-${i}` } });
    }
    const first = await search('/fhir/Basic', [
      ['_count', '7'],
      ['_sort', '-_lastUpdated'],
    ]);
    let next = (first.json() as { link: { relation: string; url: string }[] }).link.find(
      (l) => l.relation === 'next',
    )?.url;
    expect(next).toBeDefined();
    const cursor = new URL(next!).searchParams.get('_cursor')!;
    const tampered = [
      cursor.slice(0, -1),
      cursor.slice(1),
      `${cursor}x`,
      // (The last base64url character of the MAC carries 2 bits and 4 ignored ones: change an earlier one.)
      cursor.replace(/\.(.)/, (_, c: string) => `.${c === 'A' ? 'B' : 'A'}`),
      cursor.replace(/^(.)/, (c) => (c === 'W' ? 'X' : 'W')),
      cursor.split('.').reverse().join('.'),
      `${cursor}.${cursor}`,
      Buffer.from('[0,"x",1]').toString('base64url') + '.' + cursor.split('.')[1],
      '.',
      '..',
      'x'.repeat(10_000),
    ];
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constantFrom(...tampered), fc.string(), fc.base64String()), async (bad) => {
        const res = await search('/fhir/Basic', [
          ['_count', '7'],
          ['_sort', '-_lastUpdated'],
          ['_cursor', bad],
        ]);
        if (bad !== cursor && bad !== '') expect(res.statusCode).toBe(400); // an empty parameter is ignored
      }),
      runs(50, 500),
    );
    // The real cursor on another query is refused too.
    expect(
      (
        await search('/fhir/Basic', [
          ['_count', '8'],
          ['_cursor', cursor],
        ])
      ).statusCode,
    ).toBe(400);
    expect(
      (
        await search('/fhir/Patient', [
          ['_count', '7'],
          ['_sort', '-_lastUpdated'],
          ['_cursor', cursor],
        ])
      ).statusCode,
    ).toBe(400);
    // Following the real links visits every page.
    let pages = 1;
    while (next) {
      const url = new URL(next);
      const res = await search(`/fhir/Basic`, [...url.searchParams] as [string, string][]);
      expect(res.statusCode).toBe(200);
      next = (res.json() as { link: { relation: string; url: string }[] }).link.find((l) => l.relation === 'next')?.url;
      pages++;
    }
    expect(pages).toBeGreaterThanOrEqual(5);
  }, 300_000);

  it('answers random queries on random types (fast-check), by GET and POST', async () => {
    const name = (type: string) => {
      const codes = registry.searchParameters(type).map((p) => p.code);
      return fc.oneof(
        fc.constantFrom(...codes),
        fc.tuple(fc.constantFrom(...codes), fc.constantFrom(...GARBAGE_MODIFIERS)).map(([c, m]) => `${c}:${m}`),
        fc.tuple(fc.constantFrom(...codes), fc.constantFrom(...codes)).map(([a, b]) => `${a}.${b}`),
        fc.tuple(fc.constantFrom(...TYPES), fc.constantFrom(...codes)).map(([t2, c]) => `_has:${t2}:subject:${c}`),
        fc.constantFrom(
          '_sort',
          '_count',
          '_include',
          '_revinclude',
          '_elements',
          '_summary',
          '_total',
          '_cursor',
          '_type',
        ),
        fc.string({ maxLength: 15 }),
      );
    };
    const value = fc.oneof(
      fc.constantFrom(...GARBAGE_SEARCH_VALUES),
      fc.string({ maxLength: 30 }),
      fc.string({ unit: 'binary', maxLength: 20 }),
      fc.double().map(String),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
    );
    const query = fc.constantFrom(...TYPES).chain((type) =>
      fc.record({
        type: fc.constant(type),
        pairs: fc.array(fc.tuple(name(type), value), { maxLength: 5 }),
        via: fc.constantFrom('GET' as const, 'POST' as const),
        strict: fc.boolean(),
      }),
    );
    await fc.assert(
      fc.asyncProperty(query, async ({ type, pairs, via, strict }) => {
        await search(`/fhir/${type}`, pairs, via, strict ? { prefer: 'handling=strict' } : {});
      }),
      runs(300, 10_000),
    );
  }, 600_000);
});
