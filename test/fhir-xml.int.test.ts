// FHIR R4's XML representation over HTTP, on both databases, as an XML client sees it: its bodies are
// written and its answers read by the `fhir` package (an independent R4 XML implementation). Every
// interaction answers XML when Accept, _format or the body's Content-Type asks for it, errors
// included; XML bodies go through the validation JSON bodies do; hostile XML (XXE, billion laughs, deep
// nesting, oversize) is refused with nothing stored.
import { randomUUID } from 'node:crypto';
import { Fhir } from 'fhir';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { FHIR_JSON, pathOf } from './support/fhir-client.js';
import type { FhirClient, Reply } from './support/fhir-client.js';

const FHIR_XML = 'application/fhir+xml';
const MAX_BODY_BYTES = 256 * 1024;
const fhirXml = new Fhir();

type Resource = { resourceType: string; id?: string; [key: string]: unknown };

const toXml = (resource: Resource) => fhirXml.objToXml(resource);
/** An XML answer as JSON, read by the independent implementation; the answer must say it is FHIR XML. */
function fromXml(res: Reply): any {
  expect(res.headers['content-type'], res.body.slice(0, 300)).toBe('application/fhir+xml; charset=utf-8');
  expect(res.body.startsWith('<?xml version="1.0" encoding="UTF-8"?>')).toBe(true);
  return fhirXml.xmlToObj(res.body);
}

const XML_IN = { 'content-type': FHIR_XML };
const XML_BOTH = { 'content-type': FHIR_XML, accept: FHIR_XML };

describe.each(BACKENDS)('FHIR XML on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_MAX_BODY_BYTES: String(MAX_BODY_BYTES) });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  /** How many Patients carry this family name (as JSON, so that the count does not depend on XML). */
  const patientsNamed = async (family: string) =>
    (await fhir.get(`/fhir/Patient?family:exact=${family}&_total=accurate`, { accept: FHIR_JSON })).json().total;

  const narrative = (family: string) => `<div xmlns="http://www.w3.org/1999/xhtml"><p>${family} &amp; co</p></div>`;
  const nameOf = (family: string) => ({
    family,
    given: ['Ann', 'Lee'],
    _given: [null, { extension: [{ url: 'http://x.org/e', valueCode: 'n' }] }],
  });
  const patient = (family: string): Resource => ({
    resourceType: 'Patient',
    text: { status: 'generated', div: narrative(family) },
    name: [nameOf(family)],
    gender: 'female',
    birthDate: '1970-02-03',
  });

  it('creates, reads, updates and vreads in XML; the JSON of the same resource agrees', async () => {
    const family = `Xml${randomUUID().slice(0, 8)}`;
    const created = await fhir.post('/fhir/Patient', toXml(patient(family)), XML_BOTH);
    expect(created.statusCode, created.body).toBe(201);
    const stored = fromXml(created);
    expect(stored).toMatchObject({ resourceType: 'Patient', meta: { versionId: '1' }, gender: 'female' });
    expect(stored.name[0]).toEqual(nameOf(family));
    expect(created.headers.location).toContain(`/fhir/Patient/${stored.id}/_history/1`);

    const asXml = fromXml(await fhir.get(`/fhir/Patient/${stored.id}`, { accept: FHIR_XML }));
    const asJson = (await fhir.get(`/fhir/Patient/${stored.id}`)).json();
    expect(asXml).toEqual(stored);
    expect(asJson).toEqual(stored);
    expect(asJson.text.div).toBe(narrative(family));

    const updated = await fhir.put(`/fhir/Patient/${stored.id}`, toXml({ ...stored, gender: 'other' }), {
      ...XML_BOTH,
      'if-match': 'W/"1"',
    });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(fromXml(updated)).toMatchObject({ id: stored.id, gender: 'other', meta: { versionId: '2' } });
    const v1 = fromXml(await fhir.get(`/fhir/Patient/${stored.id}/_history/1?_format=xml`));
    expect(v1.gender).toBe('female');
  });

  it('searches, pages and lists history in XML, indented with _pretty', async () => {
    const family = `Page${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 3; i++) {
      expect((await fhir.post('/fhir/Patient', toXml(patient(family)), XML_IN)).statusCode).toBe(201);
    }
    const first = await fhir.get(`/fhir/Patient?family:exact=${family}&_count=2&_pretty=true`, { accept: FHIR_XML });
    const page = fromXml(first);
    expect(page).toMatchObject({ resourceType: 'Bundle', type: 'searchset' });
    expect(page.entry).toHaveLength(2);
    expect(page.entry[0].resource.name[0].family).toBe(family);
    expect(first.body).toContain('\n  <type value="searchset"/>\n');
    const next = page.link.find((l: { relation: string }) => l.relation === 'next').url as string;
    const second = fromXml(await fhir.get(pathOf(next), { accept: FHIR_XML }));
    expect(second.entry).toHaveLength(1);

    const history = fromXml(await fhir.get(`/fhir/Patient/${page.entry[0].resource.id}/_history?_format=xml`));
    expect(history).toMatchObject({ resourceType: 'Bundle', type: 'history' });

    // Chosen with _format (no Accept): the links carry it on, so every page comes in XML.
    const byFormat = fromXml(await fhir.get(`/fhir/Patient?family:exact=${family}&_count=2&_format=xml&_pretty=true`));
    const links = byFormat.link.map((l: { url: string }) => l.url) as string[];
    expect(links.every((url) => url.includes('_format=xml') && url.includes('_pretty=true'))).toBe(true);
    const nextByFormat = links[byFormat.link.findIndex((l: { relation: string }) => l.relation === 'next')];
    const secondByFormat = await fhir.get(pathOf(nextByFormat));
    expect(fromXml(secondByFormat).entry).toHaveLength(1);
    expect(secondByFormat.body).toContain('\n  <type value="searchset"/>\n');
  });

  it('runs a transaction and a batch sent in XML, answering in XML with outcomes wrapped', async () => {
    const family = `Tx${randomUUID().slice(0, 8)}`;
    const transaction = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:0a1b2c3d-0000-4000-8000-000000000001',
          resource: patient(family),
          request: { method: 'POST', url: 'Patient' },
        },
        {
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'weight' },
            subject: { reference: 'urn:uuid:0a1b2c3d-0000-4000-8000-000000000001' },
            valueQuantity: { value: 72, unit: 'kg' },
          },
          request: { method: 'POST', url: 'Observation' },
        },
      ],
    };
    const done = await fhir.post('/fhir', toXml(transaction), XML_BOTH);
    expect(done.statusCode, done.body).toBe(200);
    const response = fromXml(done);
    expect(response.type).toBe('transaction-response');
    expect(response.entry.map((e: { response: { status: string } }) => e.response.status)).toEqual([
      '201 Created',
      '201 Created',
    ]);
    expect(response.entry[1].resource.subject.reference).toMatch(/^Patient\//);

    const batch = {
      resourceType: 'Bundle',
      type: 'batch',
      entry: [
        { request: { method: 'GET', url: `Patient?family:exact=${family}` } },
        { request: { method: 'GET', url: 'Patient/does-not-exist' } },
      ],
    };
    const answered = fromXml(await fhir.post('/fhir?_format=xml', toXml(batch), XML_IN));
    expect(answered.type).toBe('batch-response');
    expect(answered.entry[0].resource.total).toBe(1);
    expect(answered.entry[1].response.status).toMatch(/^404/);
    expect(answered.entry[1].response.outcome.resourceType).toBe('OperationOutcome');
  });

  it('answers _summary, _elements and Prefer: return=OperationOutcome in XML', async () => {
    const created = fromXml(await fhir.post('/fhir/Patient', toXml(patient('Summary')), XML_BOTH));
    const summary = fromXml(await fhir.get(`/fhir/Patient/${created.id}?_summary=true&_format=xml`));
    expect(summary.meta.tag.map((t: { code: string }) => t.code)).toContain('SUBSETTED');
    expect(summary.text).toBeUndefined();
    const elements = fromXml(await fhir.get(`/fhir/Patient/${created.id}?_elements=gender`, { accept: FHIR_XML }));
    expect(elements.gender).toBe('female');
    expect(elements.name).toBeUndefined();
    const outcome = await fhir.put(`/fhir/Patient/${created.id}`, toXml({ ...created, gender: 'male' }), {
      ...XML_BOTH,
      prefer: 'return=OperationOutcome',
    });
    expect(outcome.statusCode).toBe(200);
    expect(fromXml(outcome).issue[0].diagnostics).toContain(`Patient/${created.id}`);
  });

  it('answers $validate and $everything in XML', async () => {
    const valid = fromXml(await fhir.post('/fhir/Patient/$validate', toXml(patient('Valid')), XML_BOTH));
    expect(valid.resourceType).toBe('OperationOutcome');
    expect(
      valid.issue.every((i: { severity: string }) => i.severity === 'information' || i.severity === 'warning'),
    ).toBe(true);
    const invalidBody = toXml({ resourceType: 'Patient', gender: 'sometimes' } as Resource);
    const invalid = await fhir.post('/fhir/Patient/$validate', invalidBody, XML_BOTH);
    expect(
      fromXml(invalid).issue.some((i: { expression?: string[] }) => i.expression?.includes('Patient.gender')),
    ).toBe(true);

    const created = fromXml(await fhir.post('/fhir/Patient', toXml(patient('Everything')), XML_BOTH));
    const everything = fromXml(await fhir.get(`/fhir/Patient/${created.id}/$everything`, { accept: FHIR_XML }));
    expect(everything.resourceType).toBe('Bundle');
    expect(everything.entry.map((e: { resource: Resource }) => e.resource.id)).toContain(created.id);
  });

  it('patches with a FHIRPath Patch sent as Parameters in XML', async () => {
    const created = (await fhir.post('/fhir/Patient', patient('Patch'))).json();
    const parameters = {
      resourceType: 'Parameters',
      parameter: [
        {
          name: 'operation',
          part: [
            { name: 'type', valueCode: 'replace' },
            { name: 'path', valueString: 'Patient.gender' },
            { name: 'value', valueCode: 'male' },
          ],
        },
      ],
    };
    const patched = await fhir.patch(`/fhir/Patient/${created.id}`, toXml(parameters as Resource), XML_BOTH);
    expect(patched.statusCode, patched.body).toBe(200);
    expect(fromXml(patched).gender).toBe('male');
  });

  it('refuses an invalid XML resource with the OperationOutcome its JSON gets, in XML', async () => {
    const bad = { resourceType: 'Patient', gender: 'sometimes', birthDate: '1970-13-01', colour: 'blue' };
    const asJson = await fhir.post('/fhir/Patient', bad);
    const xmlBody = `<Patient xmlns="http://hl7.org/fhir"><gender value="sometimes"/><birthDate value="1970-13-01"/><colour value="blue"/></Patient>`;
    const asXml = await fhir.post('/fhir/Patient', xmlBody, XML_BOTH);
    expect(asXml.statusCode).toBe(asJson.statusCode);
    expect(asJson.statusCode).toBe(401);
    expect(fromXml(asXml).issue).toEqual(asJson.json().issue);
  });

  it('answers errors in the format asked for: 404, 401 without a token, unknown paths', async () => {
    const missing = await fhir.get('/fhir/Patient/nope', { accept: FHIR_XML });
    expect(missing.statusCode).toBe(404);
    expect(fromXml(missing).issue[0].code).toBe('not-found');
    const anonymous = await t.app.inject({ method: 'GET', url: '/fhir/Patient?_format=xml' });
    expect(anonymous.statusCode).toBe(401);
    expect(fromXml(anonymous as unknown as Reply).issue[0].code).toBe('login');
    const unknown = await fhir.get('/fhir/Unicorn/1', { accept: 'application/xml' });
    expect(unknown.statusCode).toBe(404);
    expect(fromXml(unknown).resourceType).toBe('OperationOutcome');
    // No route at all (the not-found handler), and a method the path does not serve.
    const noRoute = await fhir.get('/fhir/Patient/1/_history/1/x/y', { accept: FHIR_XML });
    expect(noRoute.statusCode).toBe(404);
    expect(fromXml(noRoute).resourceType).toBe('OperationOutcome');
    const noMethod = await fhir.request('DELETE', '/fhir/metadata', undefined, { accept: FHIR_XML });
    expect(noMethod.statusCode).toBe(405);
    expect(fromXml(noMethod).issue[0].code).toBe('not-supported');
  });

  it('chooses by _format over Accept, by q-values, and by the body when Accept leaves it open', async () => {
    const created = (await fhir.post('/fhir/Patient', patient('Negotiate'))).json();
    const url = `/fhir/Patient/${created.id}`;
    const typeOf = async (path: string, headers: Record<string, string>) =>
      (await fhir.get(path, headers)).headers['content-type'];
    expect(await typeOf(`${url}?_format=json`, { accept: FHIR_XML })).toMatch(/^application\/fhir\+json/);
    expect(await typeOf(`${url}?_format=xml`, { accept: FHIR_JSON })).toMatch(/^application\/fhir\+xml/);
    expect(await typeOf(`${url}?_format=application/xml`, {})).toMatch(/^application\/fhir\+xml/);
    expect(await typeOf(url, { accept: 'application/fhir+json;q=0.4, application/fhir+xml;q=0.8' })).toMatch(/xml/);
    expect(await typeOf(url, { accept: 'application/fhir+xml;q=0.4, application/fhir+json;q=0.8' })).toMatch(/json/);
    expect(await typeOf(url, { accept: '*/*' })).toMatch(/^application\/fhir\+json/);
    // An XML body with no Accept (or */*) is answered in XML.
    for (const headers of [XML_IN, { ...XML_IN, accept: '*/*' }]) {
      const res = await fhir.post('/fhir/Patient', toXml(patient('BodyFormat')), headers);
      expect(res.statusCode).toBe(201);
      expect(fromXml(res).resourceType).toBe('Patient');
    }
    const json = await fhir.post('/fhir/Patient', toXml(patient('BodyFormat')), { ...XML_IN, accept: FHIR_JSON });
    expect(json.json().resourceType).toBe('Patient');
  });

  it('is 406 when the client accepts neither JSON nor XML, 415 for a body in neither', async () => {
    for (const [path, headers] of [
      ['/fhir/Patient', { accept: 'text/plain' }],
      ['/fhir/Patient?_format=html', {}],
      ['/fhir/Patient', { accept: 'application/fhir+json;q=0, application/fhir+xml;q=0' }],
    ] as const) {
      const res = await fhir.get(path, headers);
      expect(res.statusCode, path).toBe(406);
      expect(res.json().issue[0].details.coding[0].code).toBe('not-acceptable');
    }
    const family = `Plain${randomUUID().slice(0, 8)}`;
    const plain = await fhir.post('/fhir/Patient', `Patient ${family}`, {
      'content-type': 'text/plain',
      accept: FHIR_XML,
    });
    expect(plain.statusCode).toBe(415);
    expect(fromXml(plain).issue[0].diagnostics).toContain('application/fhir+xml');
    expect(await patientsNamed(family)).toBe(0);
  });

  it('refuses hostile XML with 4xx and stores nothing: XXE, billion laughs, deep nesting, oversize', async () => {
    const family = `Hostile${randomUUID().slice(0, 8)}`;
    const xxe =
      '<?xml version="1.0"?><!DOCTYPE Patient [<!ENTITY x SYSTEM "file:///etc/passwd">]>' +
      `<Patient xmlns="http://hl7.org/fhir"><name><family value="${family}"/><given value="&x;"/></name></Patient>`;
    const laughs =
      '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
      Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i === 0 ? '' : i};`.repeat(10)}">`).join('') +
      `]><Patient xmlns="http://hl7.org/fhir"><name><family value="${family}"/><given value="&lol9;"/></name></Patient>`;
    const deep =
      `<Patient xmlns="http://hl7.org/fhir"><name><family value="${family}"/></name>` +
      `${'<extension url="http://x.org/e">'.repeat(5000)}${'</extension>'.repeat(5000)}</Patient>`;
    const oversize = `<Patient xmlns="http://hl7.org/fhir"><name><family value="${family}"/>${'<given value="x"/>'.repeat(MAX_BODY_BYTES / 16)}</name></Patient>`;
    for (const [name, body, status] of [
      ['xxe', xxe, 400],
      ['billion laughs', laughs, 400],
      ['deep', deep, 400],
      ['oversize', oversize, 413],
    ] as const) {
      const res = await fhir.post('/fhir/Patient', body, XML_BOTH);
      expect(res.statusCode, name).toBe(status);
      expect(fromXml(res).resourceType).toBe('OperationOutcome');
      expect(res.body).not.toContain('root:');
    }
    const bundle = `<Bundle xmlns="http://hl7.org/fhir"><type value="transaction"/><entry><resource>${xxe.replace(/^.*?\]>/, '')}</resource><request><method value="POST"/><url value="Patient"/></request></entry></Bundle>`;
    const withDoctype = `<?xml version="1.0"?><!DOCTYPE Bundle [<!ENTITY x SYSTEM "file:///etc/passwd">]>${bundle}`;
    expect((await fhir.post('/fhir', withDoctype, XML_BOTH)).statusCode).toBe(400);
    expect(await patientsNamed(family)).toBe(0);
  });

  it('keeps Binary content raw: XML content is stored as bytes, a FHIR XML Binary as the resource', async () => {
    const cda =
      '<?xml version="1.0"?><!DOCTYPE x><ClinicalDocument xmlns="urn:hl7-org:v3"><title>Note</title></ClinicalDocument>';
    const stored = await fhir.post('/fhir/Binary', cda, { 'content-type': 'application/xml' });
    expect(stored.statusCode, stored.body).toBe(201);
    const id = stored.json().id as string;
    const content = await fhir.get(`/fhir/Binary/${id}`, { accept: 'application/xml' });
    expect(content.headers['content-type']).toMatch(/^application\/xml/);
    expect(content.body).toBe(cda);
    const resource = fromXml(await fhir.get(`/fhir/Binary/${id}`, { accept: FHIR_XML }));
    expect(resource).toMatchObject({ resourceType: 'Binary', id, contentType: 'application/xml' });
    expect(Buffer.from(resource.data, 'base64').toString()).toBe(cda);
    expect(fromXml(await fhir.get(`/fhir/Binary/${id}?_format=xml`)).id).toBe(id);

    const binary = { resourceType: 'Binary', contentType: 'text/plain', data: Buffer.from('hello').toString('base64') };
    const asResource = await fhir.post('/fhir/Binary', toXml(binary), XML_BOTH);
    expect(asResource.statusCode, asResource.body).toBe(201);
    const read = await fhir.get(`/fhir/Binary/${fromXml(asResource).id}`);
    expect(read.headers['content-type']).toMatch(/^text\/plain/);
    expect(read.body).toBe('hello');
  });

  it('lists XML in the CapabilityStatement, which it answers in XML too, compressed, varying by Accept', async () => {
    const res = await fhir.get('/fhir/metadata', { accept: FHIR_XML, 'accept-encoding': 'gzip' });
    expect(res.headers['content-encoding']).toBe('gzip');
    const vary = String(res.headers.vary)
      .split(',')
      .map((v) => v.trim().toLowerCase());
    expect(vary).toContain('accept');
    expect(vary).toContain('accept-encoding');
    const statement = fromXml(await fhir.get('/fhir/metadata', { accept: FHIR_XML }));
    expect(statement.format).toEqual(['application/fhir+json', 'json', 'application/fhir+xml', 'xml']);
    expect(statement.patchFormat).toContain('application/fhir+xml');
  });

  it('leaves the routes that speak JSON only alone: Bulk Data export', async () => {
    const res = await fhir.get('/fhir/$export', { accept: FHIR_XML, prefer: 'respond-async' });
    expect(res.statusCode).toBe(406);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
  });
});

describe('an XML client over the network (fetch)', () => {
  let t: TestApp;
  let base: string;
  let token: string;
  beforeAll(async () => {
    t = await startTestApp('sqlite');
    base = `${await t.app.listen({ host: '127.0.0.1', port: 0 })}/fhir`;
    token = await t.token();
  });
  afterAll(async () => t?.close());

  it('creates, searches and reads with XML bodies and answers, compressed where it asks', async () => {
    const headers = { authorization: `Bearer ${token}`, 'content-type': FHIR_XML, accept: FHIR_XML };
    const family = `Fetch${randomUUID().slice(0, 8)}`;
    const body = `<Patient xmlns="http://hl7.org/fhir"><name><family value="${family}"/></name></Patient>`;
    const created = await fetch(`${base}/Patient`, { method: 'POST', headers, body });
    expect(created.status).toBe(201);
    expect(created.headers.get('content-type')).toBe('application/fhir+xml; charset=utf-8');
    const patient = fhirXml.xmlToObj(await created.text()) as Resource;

    const search = await fetch(`${base}/Patient?family:exact=${family}`, {
      headers: { ...headers, 'accept-encoding': 'gzip' },
    });
    expect(search.status).toBe(200);
    const bundle = fhirXml.xmlToObj(await search.text()) as any;
    expect(bundle.entry.map((e: { resource: Resource }) => e.resource.id)).toEqual([patient.id]);

    const read = await fetch(`${base}/Patient/${patient.id}`, { headers });
    expect(fhirXml.xmlToObj(await read.text())).toEqual(patient);
  });
});
