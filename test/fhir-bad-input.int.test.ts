// Bad input found by review, through HTTP on both databases: malformed $validate parameters and Bundle
// entries are 400s (never 500s), a JSON Patch inside a Binary and whatever a patch produces keep the
// limits of a request body, `.` and `..` are no ids, and FHIR answers are never cached.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { FHIR_JSON } from './support/fhir-client.js';
import type { FhirClient, Reply } from './support/fhir-client.js';

const MAX_BODY_BYTES = 64 * 1024;

/** Extensions nested `levels` deep (each level is two levels of JSON: the extension and its array). */
function nestedExtension(levels: number): Record<string, unknown> {
  let extension: Record<string, unknown> = { url: 'http://example.org/leaf', valueString: 'x' };
  for (let i = 0; i < levels; i++) extension = { url: 'http://example.org/node', extension: [extension] };
  return extension;
}

/** An HTTP request whose path goes out exactly as given (no dot-segment resolution). */
function fetchRaw(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  const path = url.slice(url.indexOf('/', 'http://'.length));
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe.each(BACKENDS)('bad input on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_MAX_BODY_BYTES: String(MAX_BODY_BYTES) });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const expectOutcome = (res: Reply, status: number, mentions: string) => {
    expect(res.statusCode, res.body.slice(0, 500)).toBe(status);
    expect(res.json().resourceType).toBe('OperationOutcome');
    expect(JSON.stringify(res.json().issue)).toContain(mentions);
  };
  const newPatient = async () => (await fhir.post('/fhir/Patient', { resourceType: 'Patient' })).json().id as string;
  const versionOf = async (id: string) => (await fhir.get(`/fhir/Patient/${id}`)).json().meta.versionId;

  it('a body without Content-Type, or with one the route does not take: 415 naming what it takes', async () => {
    const bare = await t.app.inject({
      method: 'POST',
      url: '/fhir/Patient',
      headers: fhir.auth,
      payload: Buffer.from(JSON.stringify({ resourceType: 'Patient' })),
    });
    expectOutcome(bare, 415, 'takes application/fhir+json or application/fhir+xml (or application/json');
    expectOutcome(bare, 415, 'sent with no Content-Type');
    const patch = await fhir.patch(`/fhir/Patient/${await newPatient()}`, '[]', { 'content-type': 'text/plain' });
    expectOutcome(
      patch,
      415,
      'application/json-patch+json (JSON Patch) or application/fhir+json or application/fhir+xml',
    );
    expectOutcome(patch, 415, 'Content-Type: text/plain');
    const search = await fhir.post('/fhir/Patient/_search', 'name=x', { 'content-type': 'text/csv' });
    expectOutcome(search, 415, 'takes application/x-www-form-urlencoded');
  });

  it('$validate with a parameter that is not an array of objects: 400 naming Parameters.parameter', async () => {
    for (const parameter of ['x', [null], [1], 5]) {
      const res = await fhir.post('/fhir/Patient/$validate', { resourceType: 'Parameters', parameter });
      expectOutcome(res, 400, 'Parameters.parameter');
    }
  });

  it('a FHIRPath Patch whose parameters or parts are not objects: 400 naming them', async () => {
    const id = await newPatient();
    const operation = (part: unknown[]) => ({ name: 'operation', part });
    for (const parameter of [
      [null],
      [5],
      [operation([null])],
      [
        operation([
          { name: 'type', valueCode: 'add' },
          { name: 'path', valueString: 'Patient' },
          { name: 'name', valueString: 'contact' },
          { name: 'value', part: [null, { name: 'gender', valueCode: 'male' }] },
        ]),
      ],
    ]) {
      const res = await fhir.patch(`/fhir/Patient/${id}`, { resourceType: 'Parameters', parameter });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    expect(await versionOf(id)).toBe('1');
  });

  it('a transaction or batch whose entry is null: 400 naming the entry (batch: that entry fails)', async () => {
    const transaction = await fhir.post('/fhir', { resourceType: 'Bundle', type: 'transaction', entry: [null] });
    expectOutcome(transaction, 400, 'Bundle.entry[0]');
    const batch = await fhir.post('/fhir', { resourceType: 'Bundle', type: 'batch', entry: [null, 'x'] });
    expect(batch.statusCode).toBe(200);
    expect(batch.json().entry.map((e: { response: { status: string } }) => e.response.status)).toEqual([
      '400 Bad Request',
      '400 Bad Request',
    ]);
  });

  it('a JSON Patch in a Binary nested deeper than 64 levels: 400, nothing stored (transaction and batch)', async () => {
    const id = await newPatient();
    const patch = [{ op: 'add', path: '/extension', value: [nestedExtension(500)] }];
    const entry = {
      resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: '' },
      request: { method: 'PATCH', url: `Patient/${id}` },
    };
    entry.resource.data = Buffer.from(JSON.stringify(patch)).toString('base64');
    const transaction = await fhir.post('/fhir', { resourceType: 'Bundle', type: 'transaction', entry: [entry] });
    expectOutcome(transaction, 400, 'nested deeper than 64 levels');
    const batch = await fhir.post('/fhir', { resourceType: 'Bundle', type: 'batch', entry: [entry] });
    expect(batch.json().entry[0].response.status).toBe('400 Bad Request');
    const garbled = { ...entry, resource: { ...entry.resource, data: Buffer.from('[{').toString('base64') } };
    const notJson = await fhir.post('/fhir', { resourceType: 'Bundle', type: 'transaction', entry: [garbled] });
    expectOutcome(notJson, 400, 'not valid JSON');
    expect(await versionOf(id)).toBe('1');
  });

  it('a patch whose result is deeper than 64 levels or larger than the body limit: 422, nothing stored', async () => {
    const id = await newPatient();
    // Two adds, each within the body's depth limit, the second inside the first: 120 levels together.
    const deepest = `/extension/0${'/extension/0'.repeat(28)}/extension/-`;
    const deeper = [
      { op: 'add', path: '/extension', value: [nestedExtension(29)] },
      { op: 'add', path: deepest, value: nestedExtension(29) },
    ];
    const tooDeep = await fhir.patch(`/fhir/Patient/${id}`, deeper);
    expectOutcome(tooDeep, 422, 'nested deeper than 64 levels');

    // Each copy of the extension into itself doubles the resource: 14 copies make ~1 MB from ~100 bytes.
    const doubling = [
      { op: 'add', path: '/extension', value: [nestedExtension(1)] },
      ...Array.from({ length: 14 }, () => ({ op: 'copy', from: '/extension/0', path: '/extension/0/extension/-' })),
    ];
    const tooLarge = await fhir.patch(`/fhir/Patient/${id}`, doubling);
    expectOutcome(tooLarge, 422, String(MAX_BODY_BYTES));
    expect(await versionOf(id)).toBe('1');
  });

  it('`.` and `..` are not ids: 400 on read and update (sent raw, as a client may) and in a transaction', async () => {
    // app.inject (like any WHATWG URL) resolves dot segments before routing; a raw request does not.
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const raw = async (method: string, path: string, body?: unknown) => {
      const res = await fetchRaw(
        `${address}${path}`,
        method,
        { ...fhir.auth, 'content-type': FHIR_JSON },
        body === undefined ? undefined : JSON.stringify(body),
      );
      return { statusCode: res.status, json: () => JSON.parse(res.body) as { issue: unknown[] }, body: res.body };
    };
    for (const id of ['.', '..']) {
      for (const res of [
        await raw('PUT', `/fhir/Patient/${id}`, { resourceType: 'Patient', id }),
        await raw('GET', `/fhir/Patient/${id}`),
        await raw('GET', `/fhir/Patient/${id}/_history`),
      ]) {
        expect(res.statusCode, `${id}: ${res.body.slice(0, 300)}`).toBe(400);
        expect(JSON.stringify(res.json().issue)).toContain('relative path segment');
      }
      const transaction = await fhir.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ resource: { resourceType: 'Patient', id }, request: { method: 'PUT', url: `Patient/${id}` } }],
      });
      expectOutcome(transaction, 400, 'relative path segment');
    }
  });

  it('FHIR answers (data, searches, errors) say Cache-Control: no-store; the CapabilityStatement may be cached', async () => {
    const id = await newPatient();
    for (const res of [
      await fhir.get(`/fhir/Patient/${id}`),
      await fhir.get('/fhir/Patient?_id=' + id),
      await fhir.get('/fhir/Patient/unknown-id'),
      await t.app.inject({ method: 'GET', url: `/fhir/Patient/${id}` }),
    ]) {
      expect(res.headers['cache-control']).toBe('no-store');
    }
    const metadata = await t.app.inject({ method: 'GET', url: '/fhir/metadata' });
    expect(metadata.statusCode).toBe(200);
    expect(metadata.headers['cache-control']).not.toBe('no-store');
  });
});
