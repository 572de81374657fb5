// Values matched as a range or a pattern are limited per search (cost-limits.ts, rangeValuesPerSearch): each
// is one more comparison on every row a probing criterion reads, and the attack of issue 23 item 3,
// `Observation?code:text=<1000 values>&category:text=<1000 values>&_summary=count`, ran out the 10 s
// budget on both databases (and, with JIT, ran on in PostgreSQL for minutes). Refused before anything
// runs, however it arrives; a search within the limit answers as before.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEARCH_LIMITS } from '../src/search/cost-limits.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

interface Outcome {
  resourceType: string;
  issue: { code: string; diagnostics: string }[];
}

const LIMIT = SEARCH_LIMITS.rangeValuesPerSearch;
const words = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}${i}x`).join(',');

describe.each(BACKENDS)('range and pattern values per search on %s', (backend) => {
  let t: TestApp;
  let reader: FhirClient;
  const marker = `rl${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    t = await startTestApp(backend);
    const writer = await t.client('system/Observation.c');
    for (const text of [`${marker} alpha`, `${marker} beta`, 'unrelated']) {
      const res = await writer.create({ resourceType: 'Observation', status: 'final', code: { text } });
      expect(res.statusCode).toBe(201);
    }
    reader = await t.client('system/Observation.rs system/Patient.rs');
  });

  afterAll(async () => {
    await t?.close();
  });

  function expectRefused(status: number, body: unknown, count: number): void {
    expect(status).toBe(422);
    const outcome = body as Outcome;
    expect(outcome.resourceType).toBe('OperationOutcome');
    expect(outcome.issue[0].code).toBe('too-costly');
    expect(outcome.issue[0].diagnostics).toContain(`at most ${LIMIT} values matched as a range or a pattern`);
    expect(outcome.issue[0].diagnostics).toContain(`this one has ${count}`);
  }

  it("refuses the attack's 1,000 + 1,000 :text values at once, by GET, POST _search and in a transaction", async () => {
    const query = `code:text=${words(1000, 'a')}&category:text=${words(1000, 'b')}&_summary=count`;
    const started = performance.now();
    const viaPost = await reader.postForm('/fhir/Observation/_search', query);
    expectRefused(viaPost.statusCode, viaPost.json(), 2000);
    // Refused before any statement runs (generous: the point is that it does not run to the budget).
    expect(performance.now() - started).toBeLessThan(5000);

    const viaGet = await reader.get(`/fhir/Observation?${query}`);
    expectRefused(viaGet.statusCode, viaGet.json(), 2000);

    const bundle = await reader.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [{ request: { method: 'GET', url: `Observation?${query}` } }],
    });
    const answer = bundle.json() as Outcome;
    expect(bundle.statusCode).toBe(422);
    expect(answer.issue[0].code).toBe('too-costly');
    expect(answer.issue[0].diagnostics).toContain('values matched as a range or a pattern');
  });

  it('counts the values of every kind together, chains included', async () => {
    const half = LIMIT / 2;
    const query = [
      `code:text=${words(half, 'c')}`,
      `date=${Array.from({ length: half }, (_, i) => `ge19${String(i).padStart(2, '0')}`).join(',')}`,
      `subject:Patient.name:contains=zz`,
    ].join('&');
    const res = await reader.get(`/fhir/Observation?${query}`);
    expectRefused(res.statusCode, res.json(), LIMIT + 1);
  });

  it('answers a search at the limit, with the right matches', async () => {
    // LIMIT values, two of which match: `<marker> alpha` and `<marker> beta`.
    const values = [`${marker} alp`, `${marker} bet`, ...words(LIMIT - 2, `${marker}-none-`).split(',')];
    const res = await reader.postForm(
      '/fhir/Observation/_search',
      `code:text=${values.map(encodeURIComponent).join(',')}&_total=accurate`,
    );
    expect(res.statusCode).toBe(200);
    const bundle = res.json() as { total: number; entry: { resource: { code: { text: string } } }[] };
    expect(bundle.total).toBe(2);
    expect(bundle.entry.map((e) => e.resource.code.text).sort()).toEqual([`${marker} alpha`, `${marker} beta`]);
  });

  it('keeps long equality lists (ids, codes) to the per-parameter limit', async () => {
    const codes = Array.from({ length: 500 }, (_, i) => `http://loinc.org|${i}-1`).join(',');
    const res = await reader.postForm('/fhir/Observation/_search', `code=${encodeURIComponent(codes)}&_summary=count`);
    expect(res.statusCode).toBe(200);
    expect((res.json() as { total: number }).total).toBe(0);
  });
});
