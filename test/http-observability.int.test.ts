// Compression, request ids and the access line, over HTTP (app.inject) with the production logger.
import { randomUUID } from 'node:crypto';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { COMPRESSION_THRESHOLD_BYTES } from '../src/http/compression.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';
import { tokenRequest } from './support/token-requests.js';

const raw: string[] = [];
const lines = () => raw.map((line) => JSON.parse(line) as Record<string, unknown>);
let t: TestApp;
let fhir: FhirClient;

beforeAll(async () => {
  t = await startTestApp('sqlite', {}, { logger: createLogger('info', { write: (line: string) => raw.push(line) }) });
  fhir = await t.client();
});
afterAll(async () => t?.close());

/** Lines are written when the response has been sent, which can be just after inject resolves. */
async function linesOf(id: string, atLeast = 1): Promise<Record<string, unknown>[]> {
  for (let i = 0; i < 100; i++) {
    const mine = lines().filter((l) => l.req_id === id);
    if (mine.filter((l) => l.event === 'access').length >= atLeast) return mine;
    await new Promise((r) => setTimeout(r, 10));
  }
  return lines().filter((l) => l.req_id === id);
}

describe('compression', () => {
  const get = (url: string, headers: Record<string, string> = {}) => fhir.get(url, headers);
  const decoded = (res: { rawPayload: Buffer; headers: Record<string, unknown> }) => {
    const encoding = res.headers['content-encoding'];
    const body =
      encoding === 'br'
        ? brotliDecompressSync(res.rawPayload)
        : encoding === 'gzip'
          ? gunzipSync(res.rawPayload)
          : res.rawPayload;
    return JSON.parse(body.toString('utf8')) as unknown;
  };

  it('the CapabilityStatement: gzip and br decode to the JSON sent uncompressed to a client that does not ask', async () => {
    const plain = await get('/fhir/metadata');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toMatch(/accept-encoding/i);
    const gzip = await get('/fhir/metadata', { 'accept-encoding': 'gzip' });
    const br = await get('/fhir/metadata', { 'accept-encoding': 'gzip, deflate, br' });
    const identity = await get('/fhir/metadata', { 'accept-encoding': 'identity' });
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(br.headers['content-encoding']).toBe('br');
    expect(identity.headers['content-encoding']).toBeUndefined();
    for (const res of [gzip, br]) {
      expect(res.headers.vary).toMatch(/accept-encoding/i);
      expect(res.rawPayload.length).toBeLessThan(plain.rawPayload.length / 5);
      expect(decoded(res)).toEqual(plain.json());
    }
    expect(decoded(identity)).toEqual(plain.json());
  });

  it('the CapabilityStatement, compressed once and kept: negotiated as every other answer', async () => {
    const plain = (await get('/fhir/metadata')).json();
    const cases: [string, string | undefined][] = [
      ['br;q=0, gzip', 'gzip'],
      ['gzip;q=0.5, br;q=0.9', 'br'],
      ['*', 'gzip'],
      ['x-gzip', 'gzip'],
      ['deflate', undefined],
      ['br;q=0, gzip;q=0', undefined],
    ];
    for (const [accept, expected] of cases) {
      // Twice each: the second answer is the kept form.
      for (let i = 0; i < 2; i++) {
        const res = await get('/fhir/metadata', { 'accept-encoding': accept });
        expect(res.headers['content-encoding'], accept).toBe(expected);
        expect(res.headers.vary).toMatch(/accept-encoding/i);
        expect(decoded(res)).toEqual(plain);
      }
    }
    const refused = await get('/fhir/metadata', { 'accept-encoding': 'gzip, br', 'x-no-compression': '1' });
    expect(refused.headers['content-encoding']).toBeUndefined();
    // Any other form of it (pretty, XML) is compressed as it is made.
    const pretty = await get('/fhir/metadata?_pretty=true', { 'accept-encoding': 'gzip' });
    expect(pretty.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(pretty.rawPayload).toString('utf8')).toContain('\n  "resourceType": "CapabilityStatement"');
  });

  // Routes outside /fhir are compressed too: the console's assets (test/console.int.test.ts).
  it('a search page (a pre-serialised FHIR string) is compressed', async () => {
    const family = `Zip${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 30; i++) {
      await fhir.create({ resourceType: 'Patient', name: [{ family, given: [`Given${i}`] }] });
    }
    const url = `/fhir/Patient?family=${family}&_count=30`;
    const plain = await get(url);
    expect(plain.json().entry).toHaveLength(30);
    expect(plain.rawPayload.length).toBeGreaterThanOrEqual(COMPRESSION_THRESHOLD_BYTES);
    const gzip = await get(url, { 'accept-encoding': 'gzip' });
    expect(gzip.headers['content-encoding']).toBe('gzip');
    // The same page (a Bundle's id and lastUpdated are made per answer).
    const withoutStamp = ({ id: _id, meta: _meta, ...rest }: Record<string, unknown>) => rest;
    expect(withoutStamp(decoded(gzip) as Record<string, unknown>)).toEqual(withoutStamp(plain.json()));

    const br = await get(url, { 'accept-encoding': 'br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(withoutStamp(decoded(br) as Record<string, unknown>)).toEqual(withoutStamp(plain.json()));
  });

  it('an error large enough is compressed too; a tiny body never is', async () => {
    // An invalid resource: the OperationOutcome lists every issue, well over the threshold.
    const bad = await fhir.post(
      '/fhir/Patient',
      {
        resourceType: 'Patient',
        ...Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`unknownElement${i}`, i])),
      },
      { 'accept-encoding': 'gzip' },
    );
    expect(bad.statusCode).toBeGreaterThanOrEqual(400);
    expect(bad.headers['content-encoding']).toBe('gzip');
    expect((decoded(bad) as { resourceType: string }).resourceType).toBe('OperationOutcome');

    // Under the threshold, however much smaller it would get: a page of four Patients.
    const family = `Small${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 4; i++) await fhir.create({ resourceType: 'Patient', name: [{ family }] });
    const small = await get(`/fhir/Patient?family=${family}`, { 'accept-encoding': 'gzip, br' });
    expect(small.json().entry).toHaveLength(4);
    expect(small.rawPayload.length).toBeGreaterThan(1024);
    expect(small.rawPayload.length).toBeLessThan(COMPRESSION_THRESHOLD_BYTES);
    expect(small.headers['content-encoding']).toBeUndefined();
    expect(small.headers.vary).toBeUndefined();

    const tiny = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'accept-encoding': 'gzip, br' } });
    expect(tiny.headers['content-encoding']).toBeUndefined();
    expect(tiny.json()).toEqual({ status: 'ok' });
    const notFound = await t.app.inject({ method: 'GET', url: '/nowhere', headers: { 'accept-encoding': 'gzip, br' } });
    expect(notFound.statusCode).toBe(404);
    expect(notFound.headers['content-encoding']).toBeUndefined();
  });
});

describe('request ids and the access line', () => {
  it('a well-formed X-Request-Id is kept, echoed, and names the one access line of the request', async () => {
    const id = `client-${randomUUID()}.1:2`;
    const secret = `Secret${randomUUID().slice(0, 8)}`;
    const res = await fhir.get(`/fhir/Patient?name=${secret}`, { 'x-request-id': id });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-request-id']).toBe(id);
    const mine = await linesOf(id);
    const access = mine.filter((l) => l.event === 'access');
    expect(access).toHaveLength(1);
    expect(access[0]).toMatchObject({
      req_id: id,
      msg: 'access',
      audit: true,
      method: 'GET',
      path: '/fhir/Patient',
      route: '/fhir/:type',
      interaction: 'search-type',
      status: 200,
      resource_type: 'Patient',
    });
    expect(typeof access[0].duration_ms).toBe('number');
    expect(typeof access[0].account_id).toBe('string');
    expect(typeof access[0].username).toBe('string');
    // No other request line, and no other name for the id.
    expect(lines().some((l) => l.msg === 'incoming request' || l.msg === 'request completed')).toBe(false);
    expect(lines().some((l) => 'reqId' in l)).toBe(false);
    expect(raw.join('\n')).not.toContain(secret);
  });

  it('a malformed or missing X-Request-Id is replaced by a generated one', async () => {
    for (const incoming of ['has space', 'x'.repeat(129), 'inject"ion', '', undefined]) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/healthz',
        headers: incoming === undefined ? {} : { 'x-request-id': incoming },
      });
      const id = res.headers['x-request-id'] as string;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      expect(id).not.toBe(incoming);
      const [access] = (await linesOf(id)).filter((l) => l.event === 'access');
      expect(access).toMatchObject({ req_id: id, method: 'GET', path: '/healthz', route: '/healthz', status: 200 });
      // An unauthenticated request's line is no audit record and names no account.
      expect(access.audit).toBeUndefined();
      expect(access.account_id).toBeUndefined();
    }
  });

  it('every line of a request carries its id under req_id: audit events, errors, the access line', async () => {
    const id = `failed-login-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    const res = await tokenRequest(
      t.app,
      { username: `nobody-${randomUUID()}`, password },
      { headers: { 'x-request-id': id } },
    );
    expect(res.statusCode).toBe(401);
    expect(res.headers['x-request-id']).toBe(id);
    const mine = await linesOf(id);
    expect(mine.some((l) => l.event === 'login.failed' && l.audit === true)).toBe(true);
    expect(mine.filter((l) => l.event === 'access')).toHaveLength(1);
    expect(mine.find((l) => l.event === 'access')).toMatchObject({
      route: '/v1/ambient/api/auth/token',
      status: 401,
    });
    expect(raw.join('\n')).not.toContain(password);
  });

  it('an unmatched path gets an id and one access line without a route', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/no/such/path?secret=1' });
    expect(res.statusCode).toBe(404);
    const id = res.headers['x-request-id'] as string;
    const [access] = (await linesOf(id)).filter((l) => l.event === 'access');
    expect(access).toMatchObject({ path: '/no/such/path', status: 404 });
  });
});
