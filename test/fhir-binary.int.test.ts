// Binary as raw content (issue 12 §5; https://hl7.org/fhir/R4/http.html#binary and binary.html#rest):
// create and update take any content type, read and vread answer the bytes in their own type unless the
// client asks for FHIR JSON. Over HTTP on both databases, the bytes compared exactly.
import { randomUUID } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Client } from 'fhir-kit-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const MAX_BODY = 64 * 1024;

/** A few KB that look like a PDF and hold every byte value 0..255 (several times, in a shuffled order). */
function pdfBytes(): Buffer {
  const every = Buffer.from(Array.from({ length: 256 * 16 }, (_, i) => (i * 167 + (i >> 8)) % 256));
  return Buffer.concat([Buffer.from('%PDF-1.7\n'), every, Buffer.from('\n%%EOF\n')]);
}

describe.each(BACKENDS)('Binary as raw content on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  const pdf = pdfBytes();

  beforeAll(async () => {
    t = await startTestApp(backend, {
      AMBIENT_MAX_BODY_BYTES: String(MAX_BODY),
      AMBIENT_CORS_ORIGINS: 'https://app.example',
    });
    fhir = await t.client('system/*.cruds');
  });
  afterAll(async () => t?.close());

  /** Raw bytes with only the headers given: a Binary's media type is the request's own (or none). */
  const send = (
    method: 'POST' | 'PUT',
    url: string,
    payload: Buffer | string,
    headers: Record<string, string> = {},
    client = fhir,
  ) => t.app.inject({ method, url, payload, headers: { ...client.auth, ...headers } });
  const get = (url: string, headers: Record<string, string> = {}, client = fhir) => client.get(url, headers);
  const createPdf = async () => {
    const res = await send('POST', '/fhir/Binary', pdf, { 'content-type': 'application/pdf' });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };

  it('stores a raw PDF and answers it byte for byte, with its type, version headers and no sniffing', async () => {
    expect(pdf.length).toBeGreaterThan(4096);
    expect(new Set(pdf).size).toBe(256);
    const created = await send('POST', '/fhir/Binary', pdf, { 'content-type': 'application/pdf' });
    expect(created.statusCode, created.body).toBe(201);
    const binary = created.json();
    expect(binary).toMatchObject({ resourceType: 'Binary', contentType: 'application/pdf', meta: { versionId: '1' } });
    expect(Buffer.from(binary.data, 'base64').equals(pdf)).toBe(true);
    expect(created.headers.location).toBe(`http://fhir.test:8080/fhir/Binary/${binary.id}/_history/1`);
    expect(created.headers.etag).toBe('W/"1"');

    for (const accept of [undefined, '*/*', 'application/pdf', 'image/png']) {
      const res = await get(`/fhir/Binary/${binary.id}`, accept ? { accept } : {});
      expect(res.statusCode, `${accept}: ${res.body}`).toBe(200);
      expect(res.headers['content-type']).toBe('application/pdf');
      expect(res.rawPayload.equals(pdf), String(accept)).toBe(true);
      expect(res.headers.etag).toBe('W/"1"');
      expect(new Date(String(res.headers['last-modified'])).getTime()).toBe(
        Math.floor(Date.parse(binary.meta.lastUpdated) / 1000) * 1000,
      );
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-security-policy']).toContain('sandbox');
      expect(res.headers['content-disposition']).toBe('attachment');
      expect(res.headers['cache-control']).toBe('no-store');
      expect(String(res.headers.vary).toLowerCase()).toContain('accept');
    }
  });

  it('answers HEAD with the headers of the content and no body', async () => {
    const id = await createPdf();
    const res = await fhir.request('HEAD', `/fhir/Binary/${id}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/pdf');
    expect(res.headers.etag).toBe('W/"1"');
    expect(res.rawPayload.length).toBe(0);
  });

  it('answers the Binary resource in FHIR JSON when Accept or _format asks for it', async () => {
    const id = await createPdf();
    for (const [url, accept] of [
      [`/fhir/Binary/${id}`, 'application/fhir+json'],
      [`/fhir/Binary/${id}`, 'application/json'],
      [`/fhir/Binary/${id}`, 'application/pdf, application/fhir+json;q=0.5'],
      [`/fhir/Binary/${id}?_format=json`, 'application/pdf'],
      [`/fhir/Binary/${id}/_history/1`, 'application/fhir+json'],
    ]) {
      const res = await get(url, { accept });
      expect(res.statusCode, `${url} ${accept}`).toBe(200);
      expect(res.headers['content-type']).toBe('application/fhir+json; charset=utf-8');
      const resource = res.json();
      expect(resource).toMatchObject({ resourceType: 'Binary', id, contentType: 'application/pdf' });
      expect(Buffer.from(resource.data, 'base64').equals(pdf)).toBe(true);
    }
    // FHIR XML named explicitly, or with _format, is the resource in XML; another _format is 406.
    for (const [url, accept] of [
      [`/fhir/Binary/${id}`, 'application/fhir+xml'],
      [`/fhir/Binary/${id}?_format=xml`, 'application/pdf'],
    ]) {
      const xml = await get(url, { accept });
      expect(xml.statusCode).toBe(200);
      expect(xml.headers['content-type']).toBe('application/fhir+xml; charset=utf-8');
      expect(xml.body).toContain(`<Binary xmlns="http://hl7.org/fhir"><id value="${id}"/>`);
      expect(xml.body).toContain(`<data value="${pdf.toString('base64')}"/>`);
    }
    const turtle = await get(`/fhir/Binary/${id}?_format=ttl`);
    expect(turtle.statusCode).toBe(406);
    expect(turtle.json().resourceType).toBe('OperationOutcome');
  });

  it('updates with raw content (PUT), keeps every version readable raw, and creates on PUT to a new id', async () => {
    const id = await createPdf();
    const text = Buffer.from('Grüße, a plain text note\n', 'utf8');
    const updated = await send('PUT', `/fhir/Binary/${id}`, text, { 'content-type': 'text/plain; charset=utf-8' });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json()).toMatchObject({ id, contentType: 'text/plain; charset=utf-8', meta: { versionId: '2' } });

    const current = await get(`/fhir/Binary/${id}`);
    expect(current.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(current.rawPayload.equals(text)).toBe(true);
    expect(current.headers.etag).toBe('W/"2"');

    const v1 = await get(`/fhir/Binary/${id}/_history/1`);
    expect(v1.statusCode).toBe(200);
    expect(v1.headers['content-type']).toBe('application/pdf');
    expect(v1.headers.etag).toBe('W/"1"');
    expect(v1.rawPayload.equals(pdf)).toBe(true);
    expect((await get(`/fhir/Binary/${id}/_history/2`)).rawPayload.equals(text)).toBe(true);

    // Conditional read: the version the client holds is a 304 without a body.
    const unchanged = await get(`/fhir/Binary/${id}`, { 'if-none-match': 'W/"2"' });
    expect(unchanged.statusCode).toBe(304);
    expect(unchanged.rawPayload.length).toBe(0);

    // Conditional update takes raw content too.
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255]);
    const conditional = await send('PUT', `/fhir/Binary?_id=${id}`, png, { 'content-type': 'image/png' });
    expect(conditional.statusCode, conditional.body).toBe(200);
    expect(conditional.json().meta.versionId).toBe('3');
    expect((await get(`/fhir/Binary/${id}`)).rawPayload.equals(png)).toBe(true);

    const newId = `raw-${randomUUID()}`;
    const createdByPut = await send('PUT', `/fhir/Binary/${newId}`, png, { 'content-type': 'image/png' });
    expect(createdByPut.statusCode, createdByPut.body).toBe(201);
    expect(createdByPut.json()).toMatchObject({ id: newId, contentType: 'image/png' });
  });

  it('answers a raw write as Prefer: return= says, like any write', async () => {
    const minimal = await send('POST', '/fhir/Binary', pdf, {
      'content-type': 'application/pdf',
      prefer: 'return=minimal',
    });
    expect(minimal.statusCode).toBe(201);
    expect(minimal.body).toBe('');
    expect(minimal.headers.location).toMatch(/\/fhir\/Binary\/[^/]+\/_history\/1$/);
    const outcome = await send('POST', '/fhir/Binary', pdf, {
      'content-type': 'application/pdf',
      prefer: 'return=OperationOutcome',
    });
    expect(outcome.statusCode).toBe(201);
    expect(outcome.json().resourceType).toBe('OperationOutcome');
  });

  it('sets securityContext from X-Security-Context, and refuses a malformed one storing nothing', async () => {
    const patient = await send('POST', '/fhir/Patient', JSON.stringify({ resourceType: 'Patient', gender: 'female' }), {
      'content-type': 'application/fhir+json',
    });
    const patientId = patient.json().id as string;
    const res = await send('POST', '/fhir/Binary', pdf, {
      'content-type': 'application/pdf',
      'x-security-context': `Patient/${patientId}`,
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().securityContext).toEqual({ reference: `Patient/${patientId}` });

    const id = `ctx-${randomUUID()}`;
    for (const context of ['Patient', 'NotAType/1', 'Patient/1/2']) {
      const bad = await send('PUT', `/fhir/Binary/${id}`, pdf, {
        'content-type': 'application/pdf',
        'x-security-context': context,
      });
      expect(bad.statusCode, context).toBe(400);
      expect(bad.json().issue[0].diagnostics).toContain('X-Security-Context');
    }
    expect((await get(`/fhir/Binary/${id}`)).statusCode).toBe(404);
  });

  it('stores JSON that is not a Binary resource as content, and a Binary resource in FHIR JSON as a resource', async () => {
    const document = Buffer.from('{"not":"a resource",  "spaces kept": [1, 2]}');
    for (const contentType of ['application/json', 'application/fhir+json']) {
      const res = await send('POST', '/fhir/Binary', document, { 'content-type': contentType });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().contentType).toBe(contentType);
      const raw = await get(`/fhir/Binary/${res.json().id}`, { accept: '*/*' });
      expect(raw.rawPayload.equals(document)).toBe(true);
      expect(raw.headers['content-type']).toBe(contentType);
    }
    const resource = await send(
      'POST',
      '/fhir/Binary',
      JSON.stringify({
        resourceType: 'Binary',
        contentType: 'text/csv',
        data: Buffer.from('a,b\n1,2\n').toString('base64'),
      }),
      { 'content-type': 'application/fhir+json' },
    );
    expect(resource.statusCode, resource.body).toBe(201);
    const raw = await get(`/fhir/Binary/${resource.json().id}`);
    expect(raw.headers['content-type']).toBe('text/csv');
    expect(raw.body).toBe('a,b\n1,2\n');
    // An invalid Binary resource is still refused as one (401 by docs/api.md), not stored as content.
    const invalid = await send('POST', '/fhir/Binary', JSON.stringify({ resourceType: 'Binary' }), {
      'content-type': 'application/fhir+json',
    });
    expect(invalid.statusCode).toBe(401);
    expect(
      invalid.json().issue.some((i: { expression?: string[] }) => i.expression?.[0] === 'Binary.contentType'),
    ).toBe(true);
  });

  it('reads a Binary without data as empty content of its type', async () => {
    const res = await send(
      'POST',
      '/fhir/Binary',
      JSON.stringify({ resourceType: 'Binary', contentType: 'text/plain' }),
      {
        'content-type': 'application/fhir+json',
      },
    );
    expect(res.statusCode, res.body).toBe(201);
    const raw = await get(`/fhir/Binary/${res.json().id}`);
    expect(raw.statusCode).toBe(200);
    expect(raw.headers['content-type']).toBe('text/plain');
    expect(raw.rawPayload.length).toBe(0);
  });

  it('takes form-encoded, unnamed and any other content types on Binary; an empty body is a 400', async () => {
    const form = await send('POST', '/fhir/Binary', 'a=1&b=2', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.statusCode, form.body).toBe(201);
    expect((await get(`/fhir/Binary/${form.json().id}`)).body).toBe('a=1&b=2');

    const unnamed = await send('POST', '/fhir/Binary', Buffer.from([1, 2, 3]));
    expect(unnamed.statusCode, unnamed.body).toBe(201);
    expect(unnamed.json().contentType).toBe('application/octet-stream');

    const svg = await send(
      'POST',
      '/fhir/Binary',
      '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
      {
        'content-type': 'image/svg+xml',
      },
    );
    expect(svg.statusCode).toBe(201);
    const served = await get(`/fhir/Binary/${svg.json().id}`);
    expect(served.headers['content-type']).toBe('image/svg+xml');
    expect(served.headers['content-disposition']).toBe('attachment');
    expect(served.headers['content-security-policy']).toContain('sandbox');

    const empty = await send('POST', '/fhir/Binary', Buffer.alloc(0), { 'content-type': 'application/pdf' });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().issue[0].diagnostics).toContain('empty');
  });

  it('refuses a Content-Encoding it would store encoded (415), storing nothing', async () => {
    const id = `enc-${randomUUID()}`;
    const res = await send('PUT', `/fhir/Binary/${id}`, gzipSync(pdf), {
      'content-type': 'application/pdf',
      'content-encoding': 'gzip',
    });
    expect(res.statusCode).toBe(415);
    expect(res.json().issue[0].diagnostics).toContain('Content-Encoding');
    expect((await get(`/fhir/Binary/${id}`)).statusCode).toBe(404);
  });

  it('serves a stored contentType that cannot be a header as application/octet-stream', async () => {
    const res = await send(
      'POST',
      '/fhir/Binary',
      JSON.stringify({ resourceType: 'Binary', contentType: 'text/plain;name="€"', data: 'AAEC' }),
      { 'content-type': 'application/fhir+json' },
    );
    expect(res.statusCode, res.body).toBe(201);
    const raw = await get(`/fhir/Binary/${res.json().id}`);
    expect(raw.statusCode).toBe(200);
    expect(raw.headers['content-type']).toBe('application/octet-stream');
    expect(raw.rawPayload.equals(Buffer.from([0, 1, 2]))).toBe(true);
  });

  it('applies AMBIENT_MAX_BODY_BYTES to the raw bytes: at the cap stored, one byte more 413', async () => {
    const atCap = Buffer.alloc(MAX_BODY, 0xab);
    const stored = await send('POST', '/fhir/Binary', atCap, { 'content-type': 'application/octet-stream' });
    expect(stored.statusCode, stored.body.slice(0, 300)).toBe(201);
    expect((await get(`/fhir/Binary/${stored.json().id}`)).rawPayload.equals(atCap)).toBe(true);
    const over = await send('POST', '/fhir/Binary', Buffer.alloc(MAX_BODY + 1, 1), {
      'content-type': 'application/octet-stream',
    });
    expect(over.statusCode).toBe(413);
    expect(over.json().resourceType).toBe('OperationOutcome');
  });

  it('keeps 415 for other content types everywhere else', async () => {
    for (const [method, url] of [
      ['POST', '/fhir/Patient'],
      ['PUT', '/fhir/Patient/x1'],
      ['POST', '/fhir/Binary/_search'],
      ['POST', '/fhir/Binary/$validate'],
      ['POST', '/fhir'],
    ] as const) {
      const res = await send(method, url, pdf, { 'content-type': 'application/pdf' });
      expect(res.statusCode, `${method} ${url}`).toBe(415);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    const form = await send('POST', '/fhir/Patient', 'a=1', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.statusCode).toBe(400);
    // POST _search keeps its form body.
    const id = await createPdf();
    const search = await send('POST', '/fhir/Binary/_search', `_id=${id}`, {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(search.statusCode, search.body).toBe(200);
    expect(search.json().entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual([id]);
  });

  it('answers searches and history of Binary as JSON Bundles', async () => {
    const id = await createPdf();
    const search = await get(`/fhir/Binary?_id=${id}`, { accept: '*/*' });
    expect(search.headers['content-type']).toBe('application/fhir+json; charset=utf-8');
    const entry = search.json().entry[0].resource;
    expect(Buffer.from(entry.data, 'base64').equals(pdf)).toBe(true);
    const summary = await get(`/fhir/Binary?_id=${id}&_summary=true`);
    expect(summary.json().entry[0].resource).toMatchObject({ id, contentType: 'application/pdf' });
    expect(summary.json().entry[0].resource.data).toBeUndefined();
    const history = await get(`/fhir/Binary/${id}/_history`);
    expect(history.json()).toMatchObject({ resourceType: 'Bundle', type: 'history' });
  });

  it('checks the Binary scopes: read, create and update each need theirs', async () => {
    const id = await createPdf();
    const patientOnly = await t.client('system/Patient.cruds');
    expect((await get(`/fhir/Binary/${id}`, {}, patientOnly)).statusCode).toBe(403);
    const refused = await send('POST', '/fhir/Binary', pdf, { 'content-type': 'application/pdf' }, patientOnly);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().issue[0].diagnostics).toContain('system/Binary.c');

    const readOnly = await t.client('system/Binary.r');
    const read = await get(`/fhir/Binary/${id}`, {}, readOnly);
    expect(read.statusCode).toBe(200);
    expect(read.rawPayload.equals(pdf)).toBe(true);
    const update = await send('PUT', `/fhir/Binary/${id}`, pdf, { 'content-type': 'application/pdf' }, readOnly);
    expect(update.statusCode).toBe(403);
    expect(update.json().issue[0].diagnostics).toContain('system/Binary.u');

    // Writing is not reading (SMART v2): a create-only token gets no content back.
    const createOnly = await t.client('system/Binary.c');
    const created = await send('POST', '/fhir/Binary', pdf, { 'content-type': 'application/pdf' }, createOnly);
    expect(created.statusCode).toBe(201);
    expect(created.body).toBe('');
  });

  it('compresses raw content only in a way the client undoes to the same bytes', async () => {
    const text = Buffer.from('line of a long text document\n'.repeat(200));
    const res = await send('POST', '/fhir/Binary', text, { 'content-type': 'text/plain' });
    const id = res.json().id as string;
    const gzipped = await get(`/fhir/Binary/${id}`, { 'accept-encoding': 'gzip' });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers['content-type']).toBe('text/plain');
    expect(gunzipSync(gzipped.rawPayload).equals(text)).toBe(true);
    const identity = await get(`/fhir/Binary/${id}`);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.rawPayload.equals(text)).toBe(true);
    const pdfGzip = await get(`/fhir/Binary/${await createPdf()}`, { 'accept-encoding': 'gzip' });
    const pdfBody =
      pdfGzip.headers['content-encoding'] === 'gzip' ? gunzipSync(pdfGzip.rawPayload) : pdfGzip.rawPayload;
    expect(pdfBody.equals(pdf)).toBe(true);
  });

  it('lets a browser send X-Security-Context (CORS preflight)', async () => {
    const preflight = await t.app.inject({
      method: 'OPTIONS',
      url: '/fhir/Binary',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,x-security-context',
      },
    });
    expect(preflight.statusCode).toBe(204);
    expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).toContain('x-security-context');
  });

  it('states raw Binary content in the CapabilityStatement', async () => {
    const statement = (await t.app.inject({ method: 'GET', url: '/fhir/metadata' })).json();
    const binary = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Binary');
    expect(binary.documentation).toContain('any content type');
    expect(binary.interaction.map((i: { code: string }) => i.code)).toEqual(
      expect.arrayContaining(['create', 'read', 'vread', 'update']),
    );
  });

  it('works with fhir-kit-client (FHIR JSON) and with a plain HTTP client (raw) over a real socket', async () => {
    const address = await t.app.listen({ host: '127.0.0.1', port: 0 });
    const client = new Client({ baseUrl: `${address}/fhir`, bearerToken: fhir.token });
    const created = (await client.create({
      resourceType: 'Binary',
      body: { resourceType: 'Binary', contentType: 'application/pdf', data: pdf.toString('base64') },
    })) as unknown as { id: string };
    const read = (await client.read({ resourceType: 'Binary', id: created.id })) as unknown as { data: string };
    expect(Buffer.from(read.data, 'base64').equals(pdf)).toBe(true);

    const raw = await fetch(`${address}/fhir/Binary/${created.id}`, { headers: fhir.auth });
    expect(raw.status).toBe(200);
    expect(raw.headers.get('content-type')).toBe('application/pdf');
    expect(Buffer.from(await raw.arrayBuffer()).equals(pdf)).toBe(true);
    const upload = await fetch(`${address}/fhir/Binary/${created.id}`, {
      method: 'PUT',
      headers: { ...fhir.auth, 'content-type': 'application/pdf' },
      body: pdf.subarray(0, 1000),
    });
    expect(upload.status).toBe(200);
    const again = await fetch(`${address}/fhir/Binary/${created.id}`, { headers: fhir.auth });
    expect(Buffer.from(await again.arrayBuffer()).equals(pdf.subarray(0, 1000))).toBe(true);
  });
});
