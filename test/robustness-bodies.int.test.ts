// Robustness of the write path against bad bodies, through HTTP on both databases: 20 MB bodies, deep
// nesting, invalid UTF-8, huge numbers, malformed JSON, odd content types and headers, and random
// resources and patches (fast-check). Every answer is a 2xx or a 4xx with an OperationOutcome, never a
// 500; whatever the server accepts reads back exactly as it answered.
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../src/definitions/registry.js';
import { MAX_INDEX_ROWS_PER_RESOURCE } from '../src/storage/index-limits.js';
import { arbitraryJson, arbitraryResource, arbitraryResourceLike } from './support/fhir-arbitraries.js';
import { BACKENDS } from './support/databases.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient, Reply } from './support/fhir-client.js';
import {
  describeRequest,
  expectAnswered,
  expectClientError,
  FHIR_JSON,
  FULL,
  runs,
  startRobustnessApp,
  withoutNulOn,
} from './support/robustness.js';

const registry = loadR4Definitions();
const MB = 1024 * 1024;
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

describe.each(BACKENDS)('robustness of request bodies on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;

  beforeAll(async () => {
    t = await startRobustnessApp(backend);
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  /** Sends and checks the answer is a 4xx OperationOutcome (optionally one of `statuses`). */
  const refused = async (
    method: Method,
    url: string,
    payload?: string | Buffer,
    statuses?: number[],
    headers: Record<string, string> = {},
  ) => {
    const res = await fhir.request(method, url, payload, headers);
    expectClientError(res, describeRequest(method, url, payload), statuses);
    return res;
  };

  /** A stored Patient to update and patch. */
  const storedPatient = async () => {
    const res = await fhir.post('/fhir/Patient', JSON.stringify({ resourceType: 'Patient', active: true }));
    expect(res.statusCode).toBe(201);
    return (res.json() as { id: string }).id;
  };

  /** Every accepted write reads back exactly as it was answered. */
  const expectReadsBack = async (res: { statusCode: number; body: string }) => {
    const stored = JSON.parse(res.body) as { resourceType: string; id: string };
    // As FHIR JSON: a Binary is otherwise answered as its raw content.
    const read = await fhir.get(`/fhir/${stored.resourceType}/${stored.id}`, {
      accept: FHIR_JSON,
    });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual(stored);
  };

  describe('20 MB bodies (limit 16 MiB)', () => {
    const twentyMb = (prefix: string, suffix: string, fill = 'x') =>
      prefix + fill.repeat(20 * MB - prefix.length - suffix.length) + suffix;

    it('refuses a 20 MB resource with 413 on every write route', async () => {
      const body = twentyMb('{"resourceType":"Patient","id":"big","name":[{"family":"', '"}]}');
      expect(body.length).toBe(20 * MB);
      const id = await storedPatient();
      await refused('POST', '/fhir/Patient', body, [413]);
      await refused('PUT', '/fhir/Patient/big', body, [413]);
      await refused('PATCH', `/fhir/Patient/${id}`, body, [413], { 'content-type': 'application/json-patch+json' });
      await refused('POST', '/fhir/Patient/$validate', body, [413]);
      await refused('POST', '/fhir', twentyMb('{"resourceType":"Bundle","type":"batch","entry":[', ']', ' '), [413]);
    });

    it('refuses 20 MB of garbage, of nesting and of form parameters with 413', async () => {
      await refused('POST', '/fhir/Patient', Buffer.alloc(20 * MB, 0xff), [413]);
      await refused('POST', '/fhir/Patient', '['.repeat(20 * MB), [413]);
      await refused('POST', '/fhir/Patient/_search', twentyMb('name=', ''), [413], {
        'content-type': 'application/x-www-form-urlencoded',
      });
      await refused('POST', '/fhir/Patient', twentyMb('', ''), [413, 415], { 'content-type': 'text/plain' });
    });

    it('refuses a 20 MB token request in the OAuth error shape', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/ambient/api/auth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: twentyMb('username=a&password=', ''),
      });
      expect(res.statusCode).toBe(413);
      expect(res.json()).toMatchObject({ error: expect.any(String) });
    });

    it('still answers normally afterwards', async () => {
      const res = await fhir.post('/fhir/Patient', JSON.stringify({ resourceType: 'Patient', gender: 'other' }));
      expect(res.statusCode).toBe(201);
    });
  });

  describe('deep nesting', () => {
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

    it('refuses JSON nested deeper than 64 levels with 400, however deep', async () => {
      for (const depth of [65, 1_000, 100_000, 1_000_000]) {
        await refused('POST', '/fhir/Patient', `{"resourceType":"Patient","x":${nested(depth)}}`, [400]);
        await refused('POST', '/fhir/Patient', '{"a":'.repeat(depth) + '1' + '}'.repeat(depth), [400]);
      }
    });

    it('lets 64 levels through to the validator (401), and 64-level extensions are stored', async () => {
      await refused('POST', '/fhir/Patient', `{"resourceType":"Patient","x":${nested(63)}}`, [401]);
      // 1 (resource) + 2 per extension level (array and object): 31 levels of extensions is depth 63.
      let extension: Record<string, unknown> = { url: 'http://example.org/leaf', valueString: 'leaf' };
      for (let i = 0; i < 30; i++) extension = { url: `http://example.org/e${i}`, extension: [extension] };
      const res = await fhir.post('/fhir/Patient', JSON.stringify({ resourceType: 'Patient', extension: [extension] }));
      expect(res.statusCode).toBe(201);
      await expectReadsBack(res);
    });

    it('refuses deep nesting in patches, bundles, $validate and _search', async () => {
      const id = await storedPatient();
      const deep = nested(5_000);
      await refused('PATCH', `/fhir/Patient/${id}`, `[{"op":"add","path":"/x","value":${deep}}]`, [400], {
        'content-type': 'application/json-patch+json',
      });
      await refused('POST', '/fhir', `{"resourceType":"Bundle","type":"transaction","entry":${deep}}`, [400]);
      await refused('POST', '/fhir/Patient/$validate', `{"resourceType":"Patient","x":${deep}}`, [400]);
      await refused('PUT', `/fhir/Patient/${id}`, `{"resourceType":"Patient","id":"${id}","x":${deep}}`, [400]);
    });
  });

  describe('invalid UTF-8', () => {
    const SEQUENCES: [string, number[]][] = [
      ['0xFF', [0xff]],
      ['0xFE', [0xfe]],
      ['lone continuation byte', [0x80]],
      ['overlong "/"', [0xc0, 0xaf]],
      ['overlong NUL', [0xc0, 0x80]],
      ['UTF-16 surrogate', [0xed, 0xa0, 0x80]],
      ['above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
      ['truncated 3-byte sequence', [0xe2, 0x82]],
      ['truncated 4-byte sequence at the end', [0xf0, 0x9f, 0x98]],
      ['5-byte form', [0xf8, 0x88, 0x80, 0x80, 0x80]],
    ];

    it.each(SEQUENCES)('refuses %s in a value, a key and at the end with 400', async (_name, bytes) => {
      const bad = Buffer.from(bytes);
      const inValue = Buffer.concat([
        Buffer.from('{"resourceType":"Patient","name":[{"family":"a'),
        bad,
        Buffer.from('"}]}'),
      ]);
      const inKey = Buffer.concat([Buffer.from('{"resourceType":"Patient","'), bad, Buffer.from('":1}')]);
      const atEnd = Buffer.concat([Buffer.from('{"resourceType":"Patient"}'), bad]);
      for (const body of [inValue, inKey, atEnd]) {
        await refused('POST', '/fhir/Patient', body, [400]);
        await refused('POST', '/fhir/Patient/$validate', body, [400]);
      }
      const id = await storedPatient();
      const patch = Buffer.concat([Buffer.from('[{"op":"add","path":"/gender","value":"'), bad, Buffer.from('"}]')]);
      await refused('PATCH', `/fhir/Patient/${id}`, patch, [400], { 'content-type': 'application/json-patch+json' });
      const form = Buffer.concat([Buffer.from('name='), bad]);
      const search = await fhir.post('/fhir/Patient/_search', form, {
        'content-type': 'application/x-www-form-urlencoded',
      });
      expectAnswered(search, `POST /fhir/Patient/_search name=${_name}`);
    });

    it('answers invalid UTF-8 in the URL without a server error', async () => {
      for (const url of ['/fhir/Patient?name=%FF', '/fhir/Patient?%FF=x', '/fhir/Patient/_history?_since=%C0%80']) {
        // Undecodable bytes in a query value decode to U+FFFD (WHATWG URL rules): a search that matches nothing.
        expectAnswered(await fhir.get(url), `GET ${url}`);
      }
    });

    it('accepts odd but valid Unicode (lone surrogates, U+FFFF, astral, RTL, C0 controls) and reads it back', async () => {
      const values = [
        '\u0001\u001f',
        '\ud800',
        'x\udc00',
        '\uffff',
        '\u{10ffff}',
        '\u202egnp.exe',
        'e\u0301\u0301',
        '\u200b',
        '\ufeff',
      ];
      for (const family of values) {
        const res = await fhir.post('/fhir/Patient', JSON.stringify({ resourceType: 'Patient', name: [{ family }] }));
        expectAnswered(res, `POST /fhir/Patient family=${JSON.stringify(family)}`);
        if (res.statusCode === 201) await expectReadsBack(res);
      }
      // A UTF-8 byte order mark before the JSON is not JSON: refused, not a crash.
      const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"resourceType":"Patient"}')]);
      expectAnswered(await fhir.post('/fhir/Patient', bom), 'POST /fhir/Patient (BOM)');
    });
  });

  it('refuses a string holding an escaped U+0000 (a control character) with 401, or stores it whole', async () => {
    const res = await fhir.post(
      '/fhir/Patient',
      JSON.stringify({ resourceType: 'Patient', name: [{ family: 'a\u0000b' }] }),
    );
    expectAnswered(res, 'POST /fhir/Patient family="a\\u0000b"');
    if (res.statusCode === 201) await expectReadsBack(res);
    else expect(res.statusCode).toBe(401);
  });

  // Known defect on PostgreSQL (see withoutNulOn): conditional criteria holding U+0000 → 500.
  const CONDITIONAL_WITH_NUL: [string, () => Promise<Reply>][] = [
    [
      'POST If-None-Exist: name=a\\u0000b',
      () => fhir.post('/fhir/Patient', '{"resourceType":"Patient"}', { 'if-none-exist': 'name=a\u0000b' }),
    ],
    ['PUT /fhir/Patient?name=a%00b', () => fhir.put('/fhir/Patient?name=a%00b', '{"resourceType":"Patient"}')],
    ['DELETE /fhir/Patient?name=a%00b', () => fhir.delete('/fhir/Patient?name=a%00b')],
    [
      'POST /fhir (transaction, ifNoneExist: name=a\\u0000b)',
      () =>
        fhir.post(
          '/fhir',
          JSON.stringify({
            resourceType: 'Bundle',
            type: 'transaction',
            entry: [
              {
                resource: { resourceType: 'Patient' },
                request: { method: 'POST', url: 'Patient', ifNoneExist: 'name=a\u0000b' },
              },
            ],
          }),
        ),
    ],
  ];
  for (const [request, call] of CONDITIONAL_WITH_NUL) {
    it(`answers ${request} without a server error`, async () => expectAnswered(await call(), request));
  }

  describe('huge and odd numbers', () => {
    const NUMBERS = [
      '1e400',
      '-1e400',
      '1e-400',
      '1E+308',
      '-0',
      '0.0000000000000000000000000001',
      '123456789012345678901234567890',
      '2147483648',
      '-2147483649',
      '9007199254740993',
      '1' + '0'.repeat(100_000),
      '0.' + '1'.repeat(100_000),
      '1e9999999999',
      '4.9e-324',
      '1.7976931348623157e308',
    ];
    const FIELDS: [string, (n: string) => string][] = [
      [
        'decimal',
        (n) => `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":${n}}}`,
      ],
      ['integer', (n) => `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueInteger":${n}}`],
      ['positiveInt', (n) => `{"resourceType":"Patient","multipleBirthInteger":${n}}`],
      [
        'unsignedInt',
        (n) =>
          `{"resourceType":"ImagingStudy","status":"available","subject":{"reference":"Patient/1"},"numberOfSeries":${n}}`,
      ],
      [
        'decimal in a range',
        (n) =>
          `{"resourceType":"RiskAssessment","status":"final","subject":{"reference":"Patient/1"},"prediction":[{"probabilityDecimal":${n}}]}`,
      ],
    ];

    it.each(FIELDS)('answers every huge %s with 201 or 401, and stores only what reads back', async (_field, body) => {
      for (const n of NUMBERS) {
        const payload = body(n);
        const type = (JSON.parse(payload.replace(n, '0')) as { resourceType: string }).resourceType;
        const res = await fhir.post(`/fhir/${type}`, payload);
        expectAnswered(res, describeRequest('POST', `/fhir/${type}`, payload));
        expect([201, 401]).toContain(res.statusCode);
        if (res.statusCode === 201) {
          // Nothing is stored that JSON cannot carry (Infinity would come back as null).
          expect(res.body).not.toContain('null');
          await expectReadsBack(res);
        }
      }
    });

    it('answers huge numbers in a JSON Patch', async () => {
      const id = await storedPatient();
      for (const n of NUMBERS) {
        const payload = `[{"op":"add","path":"/multipleBirthInteger","value":${n}}]`;
        const res = await fhir.patch(`/fhir/Patient/${id}`, payload, {
          'content-type': 'application/json-patch+json',
        });
        expectAnswered(res, describeRequest('PATCH', `/fhir/Patient/${id}`, payload));
      }
    });
  });

  describe('malformed JSON and bodies that are not resources', () => {
    const BODIES = [
      '',
      ' ',
      '\n\t',
      'null',
      'true',
      '0',
      '"Patient"',
      '[]',
      '[{"resourceType":"Patient"}]',
      '{',
      '}',
      '{"resourceType":"Patient",}',
      '{"resourceType":"Patient"} trailing',
      '{"resourceType":"Patient"}{"resourceType":"Patient"}',
      "{'resourceType':'Patient'}",
      '{resourceType:"Patient"}',
      '{"resourceType":"Patient" /* comment */}',
      '{"resourceType":"Patient","active":NaN}',
      '{"resourceType":"Patient","active":undefined}',
      '{"resourceType":"Patient","active":tru}',
      '{"resourceType":"Patient","name":"\\x41"}',
      '{"resourceType":"Patient","name":"\\u12"}',
      '{"resourceType":"Patient","name":"\u0001raw control"}',
      '{"resourceType":"Patient","resourceType":"Observation"}',
      '{"resourceType":null}',
      '{"resourceType":["Patient"]}',
      '{"resourceType":{"value":"Patient"}}',
      '{"resourceType":"patient"}',
      '{"resourceType":"Patient","id":["x"]}',
      '{"resourceType":"Patient","meta":"x"}',
      '{"resourceType":"Patient","meta":{"versionId":{"a":1},"lastUpdated":[]}}',
      `{"resourceType":"Patient","${'k'.repeat(MB)}":1}`,
      `{"resourceType":"Patient",${Array.from({ length: 50_000 }, (_, i) => `"k${i}":${i}`).join(',')}}`,
      `{"resourceType":"Patient","name":[${Array.from({ length: 50_000 }, () => '{}').join(',')}]}`,
    ];

    it('answers each with a 4xx', async () => {
      const id = await storedPatient();
      for (const body of BODIES) {
        await refused('POST', '/fhir/Patient', body);
        await refused('PUT', `/fhir/Patient/${id}`, body);
        // $validate answers an invalid resource with 200 and the issues (operation-resource-validate.html).
        expectAnswered(
          await fhir.post('/fhir/Patient/$validate', body.length > 0 ? body : 'x'),
          describeRequest('POST', '/fhir/Patient/$validate', body),
        );
        await refused('POST', '/fhir', body);
        if (body !== '[]') {
          await refused('PATCH', `/fhir/Patient/${id}`, body, undefined, {
            'content-type': 'application/json-patch+json',
          });
        }
      }
    });
  });

  describe('content types and headers', () => {
    it('answers odd content types with a 4xx', async () => {
      const body = JSON.stringify({ resourceType: 'Patient' });
      for (const contentType of [
        'text/plain',
        'application/xml',
        'application/fhir+xml',
        'multipart/form-data',
        'multipart/form-data; boundary=x',
        'application/x-www-form-urlencoded',
        'application/octet-stream',
        'application/fhir+json; charset=latin1',
        'application/fhir+json;;;',
        '*/*',
        'x'.repeat(8_000),
      ]) {
        // Accept JSON: an XML body is otherwise answered in XML.
        const res = await fhir.post('/fhir/Patient', body, {
          'content-type': contentType,
          accept: 'application/fhir+json',
        });
        expectAnswered(res, `POST /fhir/Patient content-type ${contentType.slice(0, 60)}`);
      }
      // A body without a content type.
      const res = await t.app.inject({ method: 'POST', url: '/fhir/Patient', headers: fhir.auth, payload: body });
      expectAnswered(res, 'POST /fhir/Patient without content-type');
    });

    it('answers garbage conditional and preference headers without a server error', async () => {
      const id = await storedPatient();
      const body = JSON.stringify({ resourceType: 'Patient', id, active: false });
      const garbage = withoutNulOn(backend, [
        '',
        '*',
        'W/',
        'W/"',
        'W/"x"',
        '"1"',
        'W/"99999999999999999999"',
        'W/"-1"',
        '\u0000',
        'x'.repeat(5_000),
      ]);
      for (const value of garbage) {
        expectAnswered(await fhir.put(`/fhir/Patient/${id}`, body, { 'if-match': value }), `PUT if-match ${value}`);
        expectAnswered(
          await fhir.patch(`/fhir/Patient/${id}`, '[{"op":"replace","path":"/active","value":true}]', {
            'content-type': 'application/json-patch+json',
            'if-match': value,
          }),
          `PATCH if-match ${value}`,
        );
        expectAnswered(await fhir.get(`/fhir/Patient/${id}`, { 'if-none-match': value }), `GET if-none-match ${value}`);
        expectAnswered(
          await fhir.get(`/fhir/Patient/${id}`, { 'if-modified-since': value }),
          `GET if-modified-since ${value}`,
        );
        expectAnswered(await fhir.post('/fhir/Patient', body, { prefer: value }), `POST prefer ${value}`);
        expectAnswered(await fhir.get(`/fhir/Patient/${id}`, { accept: value }), `GET accept ${value}`);
        expectAnswered(
          await fhir.post('/fhir/Patient', body, { 'if-none-exist': value }),
          `POST if-none-exist ${value}`,
        );
        expectAnswered(
          await t.app.inject({ method: 'GET', url: `/fhir/Patient/${id}`, headers: { authorization: value } }),
          `GET authorization ${value}`,
        );
      }
    });

    // Fastify's router refuses these before any hook runs; its `frameworkErrors` option (src/app.ts) routes
    // them to our error handler, so they get the contract's OperationOutcome.
    it('answers router errors (undecodable path, over-long path segment) with an OperationOutcome', async () => {
      for (const url of [
        '/fhir/Patient/%FF',
        '/fhir/Patient/%C0%AF',
        '/fhir/Patient/%ED%A0%80/_history',
        '/fhir/%FF',
        '/fhir/Patient/x/_history/%FF',
        `/fhir/Patient/${'a'.repeat(300)}`,
      ]) {
        expectClientError(await fhir.get(url), `GET ${url}`);
      }
    });

    it('answers odd paths and methods without a server error', async () => {
      const id = await storedPatient();
      const paths = [
        `/fhir/Patient/${'a'.repeat(65)}`,
        '/fhir/Patient/..',
        '/fhir/Patient/%2E%2E/%2E%2E',
        '/fhir/Patient/a%2Fb',
        '/fhir/Patient/%00',
        '/fhir/Patient/ü',
        `/fhir/Patient/${id}/_history/99999999999999999999`,
        `/fhir/Patient/${id}/_history/-1`,
        `/fhir/Patient/${id}/_history/1.5`,
        `/fhir/Patient/${id}/$unknown`,
        '/fhir/Patient/$validate',
        '/fhir/$validate',
        '/fhir/_history/x',
        '/fhir//Patient',
        '/fhir/Patient//',
        '/fhir/Patient?',
        '/fhir/Patient?&&&=&=',
        `/fhir/${'Patient/'.repeat(200)}`,
        '/fhir/constructor',
        '/fhir/__proto__',
        '/fhir/Patient/constructor',
        '/fhir/Patient/__proto__/_history',
      ];
      const methods: Method[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
      for (const path of paths) {
        for (const method of methods) {
          const payload = method === 'GET' || method === 'DELETE' ? undefined : '{"resourceType":"Patient"}';
          const res = await fhir.request(method, path, payload);
          expectAnswered(res, describeRequest(method, path));
        }
      }
      for (const method of ['HEAD', 'OPTIONS'] as const) {
        const res = await fhir.request(method, `/fhir/Patient/${id}`);
        expect(res.statusCode, `${method} → ${res.body}`).toBeLessThan(500);
      }
    });
  });

  describe('random input (fast-check)', () => {
    const types = FULL
      ? registry.resourceTypes
      : ['Patient', 'Observation', 'Encounter', 'Bundle', 'Questionnaire', 'MedicationRequest', 'Condition', 'Basic'];

    it('answers random R4-shaped resources with 201 or 401, and every accepted one reads back', async () => {
      await fc.assert(
        fc.asyncProperty(arbitraryResource(registry, { types }), async ({ type, resource }) => {
          const payload = JSON.stringify(withoutNulOn(backend, resource));
          const res = await fhir.post(`/fhir/${type}`, payload);
          expectAnswered(res, describeRequest('POST', `/fhir/${type}`, payload));
          if (res.statusCode === 201) await expectReadsBack(res);
          else expect([400, 401]).toContain(res.statusCode);
          if (res.statusCode === 401) expect(res.headers['www-authenticate']).toBeUndefined();
        }),
        runs(150, 3_000),
      );
    });

    it('answers random updates (update-as-create included) with 200, 201 or a 4xx', async () => {
      await fc.assert(
        fc.asyncProperty(
          arbitraryResource(registry, { types }),
          fc.constantFrom('a', 'b', randomUUID(), 'x'.repeat(64)),
          async ({ type, resource }, id) => {
            const payload = JSON.stringify(withoutNulOn(backend, { ...resource, id }));
            const res = await fhir.put(`/fhir/${type}/${id}`, payload);
            expectAnswered(res, describeRequest('PUT', `/fhir/${type}/${id}`, payload));
            if (res.statusCode < 300) await expectReadsBack(res);
          },
        ),
        runs(100, 2_000),
      );
    });

    it('answers arbitrary JSON and resource-like objects on every write route', async () => {
      const id = await storedPatient();
      await fc.assert(
        fc.asyncProperty(fc.oneof(arbitraryJson(), arbitraryResourceLike(registry)), async (value) => {
          const payload = JSON.stringify(withoutNulOn(backend, value)) ?? 'null';
          for (const [method, url] of [
            ['POST', '/fhir/Patient'],
            ['PUT', `/fhir/Patient/${id}`],
            ['POST', '/fhir/Patient/$validate'],
            ['POST', '/fhir'],
          ] as const) {
            const res = await fhir.request(method, url, payload);
            expectAnswered(res, describeRequest(method, url, payload));
            if (res.statusCode === 201 || (method === 'PUT' && res.statusCode === 200)) await expectReadsBack(res);
          }
        }),
        runs(150, 3_000),
      );
    });

    const jsonPatchOp = fc.record(
      {
        op: fc.oneof(fc.constantFrom('add', 'remove', 'replace', 'move', 'copy', 'test'), fc.string()),
        path: fc.oneof(
          fc.constantFrom(
            '/active',
            '/name',
            '/name/0',
            '/name/-',
            '/name/0/given/0',
            '/id',
            '/resourceType',
            '/meta',
            '',
            '/',
            '/~1',
            '/~2',
            '/__proto__',
            '/constructor/prototype',
          ),
          fc.string().map((s) => `/${s}`),
          fc.string(),
        ),
        from: fc.constantFrom('/active', '/name', '/name/0', '/id', '/nope'),
        value: fc.oneof(
          fc.jsonValue({ maxDepth: 4 }),
          fc.constantFrom({ family: 'x' }, [{ family: 'x' }], 'female', true),
        ),
      },
      { requiredKeys: ['op'] },
    );

    it('answers random JSON Patches with 200 or a 4xx, and every applied patch reads back', async () => {
      const id = await storedPatient();
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(fc.array(jsonPatchOp, { maxLength: 5 }), fc.jsonValue({ maxDepth: 3 })),
          async (patch) => {
            const payload = JSON.stringify(patch) ?? 'null';
            const res = await fhir.patch(`/fhir/Patient/${id}`, payload, {
              'content-type': 'application/json-patch+json',
            });
            expectAnswered(res, describeRequest('PATCH', `/fhir/Patient/${id}`, payload));
            if (res.statusCode === 200) await expectReadsBack(res);
          },
        ),
        runs(150, 3_000),
      );
    });

    it('answers random transaction and batch Bundles; a refused transaction leaves nothing behind', async () => {
      const id = await storedPatient();
      const method = fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE', 'GET', 'HEAD', 'post', 'TRACE', '');
      const entry = fc.record(
        {
          fullUrl: fc.oneof(
            fc.uuid().map((u) => `urn:uuid:${u}`),
            fc.constantFrom('urn:oid:1.2.3', 'http://x/Patient/1', 'urn:uuid:', ''),
            fc.string(),
          ),
          resource: fc.oneof(
            arbitraryResource(registry, { types }).map(({ resource }) => resource),
            arbitraryJson(),
          ),
          request: fc.record(
            {
              method,
              url: fc.oneof(
                fc.constantFrom(...types),
                fc.constantFrom(
                  `Patient/${id}`,
                  'Patient?identifier=a|b',
                  'Patient/',
                  '/Patient',
                  'Nope/1',
                  `Patient/${id}/_history/1`,
                  'metadata',
                  '',
                ),
                fc.string(),
              ),
              ifMatch: fc.constantFrom('W/"1"', 'W/"x"', ''),
              ifNoneExist: fc.constantFrom('identifier=a|b', '_id=x', 'bogus=1', ''),
            },
            { requiredKeys: ['method', 'url'] },
          ),
        },
        { requiredKeys: [] },
      );
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('transaction', 'batch', 'collection', 'searchset', 'nope'),
          fc.array(entry, { maxLength: 6 }),
          fc.uuid(),
          async (type, entries, marker) => {
            // Every resource carries the run's marker as a tag, to find what a refused transaction left.
            const tagged = entries.map((e) =>
              e.resource && typeof e.resource === 'object' && !Array.isArray(e.resource)
                ? { ...e, resource: { ...e.resource, meta: { tag: [{ system: 'urn:robustness', code: marker }] } } }
                : e,
            );
            const payload = JSON.stringify(withoutNulOn(backend, { resourceType: 'Bundle', type, entry: tagged }));
            const res = await fhir.post('/fhir', payload);
            expectAnswered(res, describeRequest('POST', '/fhir', payload));
            if (type === 'transaction' && res.statusCode !== 200) {
              const typesTagged = new Set(tagged.map((e) => (e.resource as { resourceType?: unknown })?.resourceType));
              for (const t2 of typesTagged) {
                if (typeof t2 !== 'string' || !registry.isResourceType(t2)) continue;
                const found = await fhir.get(`/fhir/${t2}?_tag=urn:robustness|${marker}&_total=accurate`);
                expect(found.statusCode).toBe(200);
                expect(found.json().total, `refused transaction left ${t2} behind: ${payload.slice(0, 300)}`).toBe(0);
              }
            }
          },
        ),
        runs(100, 2_000),
      );
    });

    it('applies a transaction with one bad entry at a random place all or nothing', async () => {
      const bad = fc.constantFrom(
        { resource: { resourceType: 'Patient', gender: 'robot' }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Patient', bogus: 1 }, request: { method: 'PUT', url: 'Patient/robust-bad' } },
        { request: { method: 'DELETE', url: 'Patient?bogus-param=1' } },
        { request: { method: 'GET', url: 'Nope/1' } },
        { resource: { resourceType: 'Observation' }, request: { method: 'POST', url: 'Patient' } },
        { request: { method: 'PATCH', url: 'Patient/does-not-exist' }, resource: { resourceType: 'Parameters' } },
      );
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 8 }),
          fc.nat(),
          fc.option(bad, { nil: undefined }),
          fc.uuid(),
          async (count, at, badEntry, marker) => {
            const entries: unknown[] = Array.from({ length: count }, (_, i) => ({
              fullUrl: `urn:uuid:${randomUUID()}`,
              resource: {
                resourceType: 'Patient',
                meta: { tag: [{ system: 'urn:robustness', code: marker }] },
                name: [{ family: `T${i}` }],
              },
              request: { method: 'POST', url: 'Patient' },
            }));
            if (badEntry) entries.splice(at % (count + 1), 0, badEntry);
            const payload = JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: entries });
            const res = await fhir.post('/fhir', payload);
            expectAnswered(res, describeRequest('POST', '/fhir', payload));
            expect(res.statusCode, res.body.slice(0, 300)).toBe(badEntry ? res.statusCode : 200);
            if (badEntry) expect(res.statusCode).toBeGreaterThanOrEqual(400);
            const found = await fhir.get(`/fhir/Patient?_tag=urn:robustness|${marker}&_total=accurate`);
            expect(found.json().total).toBe(badEntry ? 0 : count);
          },
        ),
        runs(40, 500),
      );
    });

    it('answers random FHIRPath Patches with 200 or a 4xx', async () => {
      const id = await storedPatient();
      const part = fc.record(
        {
          name: fc.constantFrom('type', 'path', 'name', 'value', 'index', 'source', 'destination', 'valueString', 'x'),
          valueCode: fc.constantFrom('add', 'insert', 'delete', 'replace', 'move', 'bogus'),
          valueString: fc.oneof(
            fc.constantFrom(
              'Patient',
              'Patient.name',
              'Patient.name[0]',
              'Patient.name.where(',
              '%x',
              'Patient.active',
              '{}',
              '((((((',
            ),
            fc.string(),
          ),
          valueInteger: fc.oneof(fc.integer(), fc.constant(2 ** 31)),
          valueBoolean: fc.boolean(),
        },
        { requiredKeys: ['name'] },
      );
      const parameters = fc.record({
        resourceType: fc.constantFrom('Parameters', 'Patient'),
        parameter: fc.array(
          fc.record(
            { name: fc.constantFrom('operation', 'op', ''), part: fc.array(part, { maxLength: 6 }) },
            { requiredKeys: ['name'] },
          ),
          { maxLength: 4 },
        ),
      });
      await fc.assert(
        fc.asyncProperty(parameters, async (patch) => {
          const payload = JSON.stringify(withoutNulOn(backend, patch));
          const res = await fhir.patch(`/fhir/Patient/${id}`, payload);
          expectAnswered(res, describeRequest('PATCH', `/fhir/Patient/${id}`, payload));
          if (res.statusCode === 200) await expectReadsBack(res);
        }),
        runs(150, 3_000),
      );
    });
  });
});

describe('20 MB bodies under a 32 MiB limit', () => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startRobustnessApp('sqlite', { AMBIENT_MAX_BODY_BYTES: String(32 * MB) });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const post = (url: string, payload: string) => fhir.post(url, payload);

  it('stores a 20 MB Binary (base64Binary has no 1 MB limit: the body limit bounds it) and reads it back raw', async () => {
    const bytes = Buffer.alloc(15 * MB, 7);
    const data = bytes.toString('base64'); // 20 MB of base64
    const res = await post(
      '/fhir/Binary',
      JSON.stringify({ resourceType: 'Binary', contentType: 'application/octet-stream', data }),
    );
    expect(res.statusCode).toBe(201);
    const raw = await fhir.get(`/fhir/Binary/${res.json().id}`);
    expect(raw.headers['content-type']).toBe('application/octet-stream');
    expect(raw.rawPayload.equals(bytes)).toBe(true);
  });

  it('refuses a 20 MB string (over R4 string limit of 1 MB) with 401 naming the element', async () => {
    const res = await post(
      '/fhir/Patient',
      JSON.stringify({ resourceType: 'Patient', name: [{ family: 'x'.repeat(20 * MB) }] }),
    );
    expectClientError(res, 'POST /fhir/Patient (20 MB family)', [401]);
    expect(res.json().issue[0].expression).toEqual(['Patient.name[0].family']);
  });

  it('refuses a Patient of 330,000 names (20 MB; 3 MB in the quick run) over the index-row bound (422) in bounded time, stores one under it and reads it back whole; refuses 20 MB of nesting (400)', async () => {
    // Five index rows per name: 330,000 names asked for 1.65 million rows (10-19 s per write, the event loop
    // blocked ~5 s on PostgreSQL) before the bound; now the write stops at the bound and is refused whole.
    const patient = (count: number) => ({
      resourceType: 'Patient',
      name: Array.from({ length: count }, (_, i) => ({ family: `Family-${i}`, given: ['Given', 'Names', String(i)] })),
    });
    const big = JSON.stringify(patient(FULL ? 330_000 : 50_000));
    expect(big.length).toBeGreaterThan(FULL ? 19 * MB : 2 * MB);
    const started = performance.now();
    const refused = await post('/fhir/Patient', big);
    // The full run's 330,000 names are 2 million JSON values: refused as they arrive (413), before the
    // index-row bound is reached (422).
    expectClientError(refused, 'POST /fhir/Patient (a Patient over the index-row bound)', [FULL ? 413 : 422]);
    expect(refused.json().issue[0].code).toBe(FULL ? 'too-long' : 'too-costly');
    expect(performance.now() - started).toBeLessThan(10_000);

    const names = patient(MAX_INDEX_ROWS_PER_RESOURCE / 5 - 100).name;
    const res = await post('/fhir/Patient', JSON.stringify({ resourceType: 'Patient', name: names }));
    expect(res.statusCode, res.body.slice(0, 300)).toBe(201);
    const { id } = res.json() as { id: string };
    const read = await fhir.get(`/fhir/Patient/${id}`);
    expect(read.statusCode).toBe(200);
    expect(read.json().name).toEqual(names);
    expectClientError(await post('/fhir/Patient', '['.repeat(20 * MB)), 'POST /fhir/Patient (20 MB of [)', [400]);
  }, 300_000);
});

describe('bodies over a real socket', () => {
  let t: TestApp;
  let fhir: FhirClient;
  let base: string;
  beforeAll(async () => {
    t = await startRobustnessApp('sqlite');
    fhir = await t.client();
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => t?.close());

  /** Sends raw bytes on a fresh connection and returns the status line the server answers (or ''). */
  const raw = (chunks: (string | Buffer)[], { endAfter = true } = {}) =>
    new Promise<string>((resolve) => {
      const { port } = new URL(base);
      const socket = connect(Number(port), '127.0.0.1');
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
      socket.on('error', () => resolve(answer.split('\r\n')[0]));
      socket.on('close', () => resolve(answer.split('\r\n')[0]));
      socket.on('connect', () => {
        for (const chunk of chunks) socket.write(chunk);
        if (endAfter) socket.end();
        else setTimeout(() => socket.destroy(), 300);
      });
    });

  const healthy = async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const res = await fetch(`${base}/fhir/Patient`, {
      method: 'POST',
      headers: { ...fhir.auth, 'content-type': FHIR_JSON },
      body: JSON.stringify({ resourceType: 'Patient', active: true }),
    });
    expect(res.status).toBe(201);
  };

  it('answers a 20 MB chunked body (no Content-Length) with 413 and stays healthy', async () => {
    const chunk = Buffer.alloc(MB, 'x');
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"resourceType":"Patient","name":[{"family":"'));
        for (let i = 0; i < 20; i++) controller.enqueue(new Uint8Array(chunk));
        controller.enqueue(new TextEncoder().encode('"}]}'));
        controller.close();
      },
    });
    const res = await fetch(`${base}/fhir/Patient`, {
      method: 'POST',
      headers: { ...fhir.auth, 'content-type': FHIR_JSON },
      body,
      duplex: 'half',
    } as RequestInit).catch((error: Error) => ({ status: `closed: ${error.message}` }));
    // Either the 413 arrives, or the server closes the connection while the client is still sending.
    if (typeof res.status === 'number') expect(res.status).toBe(413);
    await healthy();
  });

  it('survives lying Content-Length, truncated bodies, garbage HTTP and oversized headers', async () => {
    const token = fhir.auth.authorization;
    const head = (length: number | string) =>
      `POST /fhir/Patient HTTP/1.1\r\nHost: x\r\nAuthorization: ${token}\r\nContent-Type: application/fhir+json\r\nContent-Length: ${length}\r\n\r\n`;
    expect(await raw([head(10), '{"resourceType":"Patient"}'])).toMatch(/^HTTP\/1.1 4\d\d/);
    // The client hangs up mid-body: a 400 or no answer at all.
    expect(await raw([head(1000), '{"resourceType"'])).toMatch(/^(HTTP\/1.1 400 .*)?$/);
    expect(await raw([head(99 * MB), 'x'])).toMatch(/^HTTP\/1.1 413/);
    expect(await raw([head('-1')])).toMatch(/^HTTP\/1.1 400/);
    expect(await raw([head('abc')])).toMatch(/^HTTP\/1.1 400/);
    expect(await raw(['GARBAGE\r\n\r\n'])).toMatch(/^HTTP\/1.1 400/);
    expect(await raw(['\u0000\u0001\u0002\r\n\r\n'])).toMatch(/^HTTP\/1.1 400/);
    expect(await raw([`GET /fhir/Patient HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`])).toMatch(
      /^HTTP\/1.1 431/,
    );
    expect(await raw([`GET /fhir/Patient?${'a=b&'.repeat(10_000)} HTTP/1.1\r\nHost: x\r\n\r\n`])).toMatch(
      /^HTTP\/1.1 431/,
    );
    // A client that sends half a body and goes silent, many times over.
    await Promise.all(Array.from({ length: 50 }, () => raw([head(5000), '{"resourceType":'], { endAfter: false })));
    await healthy();
  });
});

describe('a refused body, from a server in its own process', () => {
  let server: ServerProcess;
  let folder: string;
  beforeAll(async () => {
    folder = mkdtempSync(join(tmpdir(), 'ambient-refused-body-'));
    server = await startServerProcess({ DATABASE_URL: `sqlite:${join(folder, 'ambient.db')}` });
  });
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    rmSync(folder, { recursive: true, force: true });
  });

  it('answers every oversize body with its 413, never a reset: the rest of a declared body is read', async () => {
    // A connection closed with request bytes unread is reset, and the reset can discard the answer before
    // the client reads it (one answer in six was lost so when the server closed after its 413). Only
    // across processes: in one process the client reads the answer before the server closes.
    const body = Buffer.alloc(17 * MB, 'x');
    const send = () =>
      new Promise<string>((resolve) => {
        const headers = { 'content-type': 'application/x-www-form-urlencoded' };
        const request = httpRequest(`${server.url}/v1/ambient/api/auth/token`, { method: 'POST', headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () => resolve(`${res.statusCode} ${Buffer.concat(chunks).toString()}`));
        });
        request.on('error', (error: NodeJS.ErrnoException) => resolve(`error ${error.code}`));
        request.end(body);
      });
    const answers: string[] = [];
    for (let i = 0; i < 40; i++) answers.push(await send());
    expect(answers.map((answer) => answer.split(' ')[0])).toEqual(Array.from({ length: 40 }, () => '413'));
    expect(JSON.parse(answers[0].slice(4))).toMatchObject({ error: 'invalid_request' });
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});
