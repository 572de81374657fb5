// Long values in indexed elements (docs/search.md, "Long values"), over HTTP on both databases: R4
// strings may be 1 MB, and PostgreSQL refuses a B-tree entry over ~2.7 kB, so the index tables key on a
// bounded prefix (INDEX_KEY_LENGTH) and recheck the whole value. Resources with 3,000, 10,000 and
// 100,000-character random values in every kind of indexed element are stored, read back exactly, found
// by the searches that match them and by no other: two resources whose values differ only in their last
// character share the indexed prefix, so each search must tell them apart by the whole value.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INDEX_KEY_LENGTH } from '../src/search/tables.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const SCOPES = ['Observation', 'Patient', 'Questionnaire', 'QuestionnaireResponse']
  .map((t) => `system/${t}.cruds`)
  .join(' ');

// Letters, digits and characters of two, three and four UTF-8 bytes (the last a surrogate pair in
// JavaScript): no white space and none of the search syntax's `,|$\` or `/`, so one alphabet serves
// strings, codes, uris and URL paths.
const ALPHABET = [
  ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.',
  'ß',
  'ж',
  '中',
  '語',
  '😀',
  '𝄞',
];

/** `length` random characters (code points) of ALPHABET, incompressible, ending in a lower-case 'a'. */
function randomText(length: number): string {
  const bytes = randomBytes(length);
  let text = '';
  for (let i = 0; i < length - 1; i++) text += ALPHABET[bytes[i] % ALPHABET.length];
  return text + 'a';
}

/** Code points `start` to `end` of `text` (a UTF-16 slice could cut a surrogate pair in half). */
const cut = (text: string, start: number, end?: number): string => [...text].slice(start, end).join('');

/** The same text with its last character changed: equal to `text` over the indexed prefix and far beyond. */
const twin = (text: string): string => cut(text, 0, -1) + 'b';

describe.each(BACKENDS)('long values in indexed elements on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;

  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client(SCOPES);
  });
  afterAll(async () => t?.close());

  const read = async (type: string, id: string) => {
    const res = await fhir.get(`/fhir/${type}/${id}`);
    expect(res.statusCode).toBe(200);
    return res.json() as Record<string, unknown>;
  };
  /** Ids found by POST `_search` (a form body: these values do not fit in a URL), sorted. */
  const found = async (type: string, params: [string, string][]) => {
    const res = await fhir.postForm(
      `/fhir/${type}/_search`,
      new URLSearchParams([...params, ['_count', '50']]).toString(),
    );
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    const bundle = res.json() as { entry?: { resource: { id: string } }[] };
    return (bundle.entry ?? []).map((e) => e.resource.id).sort();
  };
  const created = (res: { statusCode: number; body: string; json(): unknown }) => {
    expect(res.statusCode, res.body.slice(0, 300)).toBe(201);
    return (res.json() as { id: string }).id;
  };
  const sorted = (...ids: string[]) => [...ids].sort();

  describe.each([3_000, 10_000, 100_000])('%i characters', (length) => {
    it('stores and finds long strings, codes, identifiers and references (Observation)', async () => {
      const text = randomText(length);
      const codeSystem = `urn:test:${randomText(length)}`;
      const code = randomText(length);
      const identifierSystem = `https://ids.example/${randomText(length)}`;
      const identifierValue = randomText(length);
      const typeSystem = `https://types.example/${randomText(length)}`;
      const subject = `https://other.example/fhir/Patient/${randomText(length)}`;
      const observation = (variant: (s: string) => string) => ({
        resourceType: 'Observation',
        status: 'final',
        code: { coding: [{ system: codeSystem, code: variant(code) }] },
        identifier: [
          {
            system: identifierSystem,
            value: variant(identifierValue),
            type: { coding: [{ system: typeSystem, code: 'MR' }] },
          },
        ],
        subject: { reference: variant(subject) },
        valueString: variant(text),
      });
      const same = (s: string) => s;
      const one = randomText(20).replace(/[^A-Za-z0-9]/g, 'x');
      // PUT (create with the client's id) for one, POST for its twin.
      const a = created(await fhir.put(`/fhir/Observation/${one}`, { ...observation(same), id: one }));
      const b = created(await fhir.post('/fhir/Observation', observation(twin)));
      expect(a).toBe(one);

      const stored = await read('Observation', a);
      expect(stored).toMatchObject(observation(same));
      expect((stored.valueString as string).length).toBe(text.length);
      expect((await read('Observation', b)).valueString).toBe(twin(text));

      const search = (params: [string, string][]) => found('Observation', params);
      // string: starts-with (short prefix, a prefix past the key, the whole value), :exact, :contains.
      expect(await search([['value-string', cut(text, 0, 10)]])).toEqual(sorted(a, b));
      expect(await search([['value-string', cut(text, 0, -1)]])).toEqual(sorted(a, b));
      expect(await search([['value-string', text]])).toEqual([a]);
      expect(await search([['value-string', twin(text)]])).toEqual([b]);
      expect(await search([['value-string', text + 'a']])).toEqual([]);
      expect(await search([['value-string:exact', text]])).toEqual([a]);
      expect(await search([['value-string:exact', cut(text, 0, -1)]])).toEqual([]);
      expect(await search([['value-string:contains', cut(text, -40)]])).toEqual([a]);
      expect(await search([['value-string:contains', cut(text, -40, -1)]])).toEqual(sorted(a, b));
      // token: system|code, code alone, :not, identifiers and :of-type.
      expect(await search([['code', `${codeSystem}|${code}`]])).toEqual([a]);
      expect(await search([['code', twin(code)]])).toEqual([b]);
      expect(await search([['code', `${codeSystem}|${cut(code, 0, -1)}`]])).toEqual([]);
      expect(await search([['code', `${twin(codeSystem)}|${code}`]])).toEqual([]);
      expect(
        await search([
          ['_id', `${a},${b}`],
          ['code:not', `${codeSystem}|${code}`],
        ]),
      ).toEqual([b]);
      expect(await search([['identifier', `${identifierSystem}|${identifierValue}`]])).toEqual([a]);
      expect(await search([['identifier', `${identifierSystem}|${twin(identifierValue)}`]])).toEqual([b]);
      expect(await search([['identifier:of-type', `${typeSystem}|MR|${identifierValue}`]])).toEqual([a]);
      expect(await search([['identifier:of-type', `${twin(typeSystem)}|MR|${identifierValue}`]])).toEqual([]);
      // reference: another server's URL, kept whole.
      expect(await search([['subject', subject]])).toEqual([a]);
      expect(await search([['subject', twin(subject)]])).toEqual([b]);
      expect(await search([['subject', cut(subject, 0, -1)]])).toEqual([]);
      // composite: a token and a string of the same element.
      expect(await search([['code-value-string', `${codeSystem}|${code}$${text}`]])).toEqual([a]);
      expect(await search([['code-value-string', `${codeSystem}|${code}$${twin(text)}`]])).toEqual([]);
      // sorting on a long value answers (both, in some order).
      expect(
        await search([
          ['_id', `${a},${b}`],
          ['_sort', '-value-string'],
        ]),
      ).toEqual(sorted(a, b));

      // An update replaces the rows: the old value is found no more, the new one is.
      const next = randomText(length);
      const updated = await fhir.put(`/fhir/Observation/${a}`, { ...observation(same), id: a, valueString: next });
      expect(updated.statusCode, updated.body.slice(0, 300)).toBe(200);
      expect(await search([['value-string:exact', text]])).toEqual([]);
      expect(await search([['value-string:exact', next]])).toEqual([a]);
    });

    it('stores and finds long quantity units and systems (Observation.valueQuantity)', async () => {
      const system = `https://units.example/${randomText(length)}`;
      const unitCode = randomText(length);
      const unit = randomText(length);
      const identifierSystem = `https://ids.example/${randomText(length)}`;
      const identifierValue = randomText(length);
      const observation = (variant: (s: string) => string) => ({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'long units' },
        subject: { identifier: { system: identifierSystem, value: variant(identifierValue) } },
        valueQuantity: { value: 5.4, unit: variant(unit), system, code: variant(unitCode) },
      });
      const a = created(
        await fhir.post(
          '/fhir/Observation',
          observation((s) => s),
        ),
      );
      const b = created(await fhir.post('/fhir/Observation', observation(twin)));
      expect(await read('Observation', a)).toMatchObject(observation((s) => s));

      const search = (params: [string, string][]) => found('Observation', params);
      expect(await search([['value-quantity', `5.4|${system}|${unitCode}`]])).toEqual([a]);
      expect(await search([['value-quantity', `5.4|${system}|${twin(unitCode)}`]])).toEqual([b]);
      expect(await search([['value-quantity', `5.4||${unit}`]])).toEqual([a]);
      expect(await search([['value-quantity', `gt5|${system}|${unitCode}`]])).toEqual([a]);
      expect(await search([['value-quantity', `6|${system}|${unitCode}`]])).toEqual([]);
      expect(await search([['value-quantity', `5.4|${system}|${cut(unitCode, 0, -1)}`]])).toEqual([]);
      expect(await search([['subject:identifier', `${identifierSystem}|${identifierValue}`]])).toEqual([a]);
      expect(await search([['subject:identifier', `${identifierSystem}|${cut(identifierValue, 0, -1)}`]])).toEqual([]);
    });

    it('stores and finds long names, telecoms and addresses (Patient)', async () => {
      const family = randomText(length);
      const given = randomText(length);
      const phone = randomText(length);
      const line = randomText(length);
      const patient = (variant: (s: string) => string) => ({
        resourceType: 'Patient',
        name: [{ family: variant(family), given: [given] }],
        telecom: [{ system: 'phone', value: variant(phone) }],
        address: [{ line: [variant(line)], city: 'Springfield' }],
      });
      const a = created(
        await fhir.post(
          '/fhir/Patient',
          patient((s) => s),
        ),
      );
      const b = created(await fhir.post('/fhir/Patient', patient(twin)));
      expect(await read('Patient', a)).toMatchObject(patient((s) => s));

      const search = (params: [string, string][]) => found('Patient', params);
      expect(await search([['family', family]])).toEqual([a]);
      expect(await search([['family:exact', twin(family)]])).toEqual([b]);
      expect(await search([['family', cut(family, 0, -1)]])).toEqual(sorted(a, b));
      expect(await search([['given', given]])).toEqual(sorted(a, b));
      // `name` also matches the assembled "given family".
      expect(await search([['name', `${given} ${family}`]])).toEqual([a]);
      expect(await search([['telecom', `phone|${phone}`]])).toEqual([a]);
      expect(await search([['phone', twin(phone)]])).toEqual([b]);
      expect(await search([['address', line]])).toEqual([a]);
      expect(await search([['address:contains', cut(line, -30)]])).toEqual([a]);
      expect(
        await search([
          ['given', given],
          ['family:not', family],
        ]),
      ).toEqual([b]);
    });

    it('stores and finds long uris and canonical references (Questionnaire, QuestionnaireResponse)', async () => {
      const url = `https://forms.example/${randomText(length)}`;
      const questionnaire = (canonical: string) => ({
        resourceType: 'Questionnaire',
        status: 'active',
        url: canonical,
      });
      const a = created(await fhir.post('/fhir/Questionnaire', questionnaire(url)));
      const b = created(await fhir.post('/fhir/Questionnaire', questionnaire(twin(url))));
      expect((await read('Questionnaire', a)).url).toBe(url);

      const search = (params: [string, string][]) => found('Questionnaire', params);
      expect(await search([['url', url]])).toEqual([a]);
      expect(await search([['url', `${url},${twin(url)}`]])).toEqual(sorted(a, b));
      expect(await search([['url', cut(url, 0, -1)]])).toEqual([]);
      expect(await search([['url:below', cut(url, 0, -1)]])).toEqual(sorted(a, b));
      expect(await search([['url:below', url]])).toEqual([a]);
      expect(await search([['url:below', cut(url, 0, 30)]])).toEqual(sorted(a, b));
      expect(await search([['url:above', `${url}/section/1`]])).toEqual([a]);

      const response = (canonical: string) => ({
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        questionnaire: canonical,
      });
      const r = created(await fhir.post('/fhir/QuestionnaireResponse', response(url)));
      const s = created(await fhir.post('/fhir/QuestionnaireResponse', response(twin(url))));
      expect((await read('QuestionnaireResponse', r)).questionnaire).toBe(url);
      expect(await found('QuestionnaireResponse', [['questionnaire', url]])).toEqual([r]);
      expect(await found('QuestionnaireResponse', [['questionnaire', twin(url)]])).toEqual([s]);
      expect(await found('QuestionnaireResponse', [['questionnaire', cut(url, 0, -1)]])).toEqual([]);
    });
  });
  it('tells a value exactly a key long from longer values sharing it as key', async () => {
    // `https://forms.example/` and random characters up to INDEX_KEY_LENGTH code points: its key is itself.
    const head = 'https://forms.example/';
    const exact = head + randomText(INDEX_KEY_LENGTH - head.length);
    const longer = exact + 'x';
    const questionnaire = (url: string) => ({ resourceType: 'Questionnaire', status: 'active', url, title: url });
    const a = created(await fhir.post('/fhir/Questionnaire', questionnaire(exact)));
    const b = created(await fhir.post('/fhir/Questionnaire', questionnaire(longer)));
    const search = (params: [string, string][]) => found('Questionnaire', params);
    expect(await search([['url', exact]])).toEqual([a]);
    expect(await search([['url', longer]])).toEqual([b]);
    expect(await search([['url', `${exact},${longer}`]])).toEqual(sorted(a, b));
    expect(await search([['url:below', exact]])).toEqual(sorted(a, b));
    expect(await search([['title:exact', exact]])).toEqual([a]);
    // Sorted by url over every Questionnaire (read from the index in key order): the one whose url is
    // the key comes before the longer one sharing it.
    const byUrl = await fhir.get('/fhir/Questionnaire?_sort=url&_count=100');
    expect(byUrl.statusCode).toBe(200);
    const order = (byUrl.json() as { entry: { resource: { id: string } }[] }).entry.map((e) => e.resource.id);
    expect(order.indexOf(a)).toBeGreaterThanOrEqual(0);
    expect(order.indexOf(b)).toBe(order.indexOf(a) + 1);
    expect(await search([['title', exact]])).toEqual(sorted(a, b));
    expect(
      await search([
        ['_id', `${a},${b}`],
        ['title:not', exact],
      ]),
    ).toEqual([b]);
  });
});
