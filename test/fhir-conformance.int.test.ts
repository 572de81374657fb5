// Behaviour FHIR R4 or HTTP mandates at the edges (issue 12 §6): absolute fullUrls in a transaction,
// `metadata` in a Bundle, content negotiation (406), what the CapabilityStatement states, and
// operations the server lacks (400 not-supported). On both databases, over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

type Entry = { fullUrl?: string; resource?: Record<string, unknown>; request: Record<string, unknown> };
const bundle = (type: 'batch' | 'transaction', entry: Entry[]) => ({ resourceType: 'Bundle', type, entry });

describe.each(BACKENDS)('FHIR conformance on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_REFERENTIAL_INTEGRITY: '1' });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const post = (body: unknown) => fhir.post('/fhir', body);

  it('resolves a relative reference against an absolute fullUrl base to the entry it names', async () => {
    // An unrelated local Patient/0 exists: the reference must not land on it.
    const local = await fhir.put('/fhir/Patient/0', { resourceType: 'Patient', id: '0', name: [{ family: 'Local' }] });
    expect([200, 201]).toContain(local.statusCode);
    const res = await post(
      bundle('transaction', [
        {
          fullUrl: 'http://example.org/fhir/Observation/1',
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'x' },
            subject: { reference: 'Patient/0' },
          },
          request: { method: 'POST', url: 'Observation' },
        },
        {
          fullUrl: 'http://example.org/fhir/Patient/0',
          resource: { resourceType: 'Patient', name: [{ family: 'InBundle' }] },
          request: { method: 'POST', url: 'Patient' },
        },
      ]),
    );
    expect(res.statusCode, res.body).toBe(200);
    const [observationLoc, patientLoc] = res
      .json()
      .entry.map((e: { response: { location: string } }) => e.response.location.replace(/\/_history\/1$/, ''));
    expect(patientLoc).not.toBe('Patient/0');
    const observation = (await fhir.get(`/fhir/${observationLoc}`)).json();
    expect(observation.subject.reference).toBe(patientLoc);
  });

  it('keeps a relative reference local when no entry has the resulting fullUrl', async () => {
    const res = await post(
      bundle('transaction', [
        {
          fullUrl: 'http://example.org/fhir/Observation/2',
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'x' },
            subject: { reference: 'Patient/0' },
          },
          request: { method: 'POST', url: 'Observation' },
        },
      ]),
    );
    expect(res.statusCode, res.body).toBe(200);
    const location = res.json().entry[0].response.location.replace(/\/_history\/1$/, '');
    expect((await fhir.get(`/fhir/${location}`)).json().subject.reference).toBe('Patient/0');
  });

  it('answers GET metadata in a batch and a transaction with the CapabilityStatement', async () => {
    for (const type of ['batch', 'transaction'] as const) {
      const res = await post(bundle(type, [{ request: { method: 'GET', url: 'metadata' } }]));
      expect(res.statusCode, res.body).toBe(200);
      const [entry] = res.json().entry;
      expect(entry.response.status).toBe('200 OK');
      expect(entry.resource.resourceType).toBe('CapabilityStatement');
    }
  });

  describe('content negotiation', () => {
    const notAcceptable = [
      'text/plain',
      'image/png, text/html',
      'application/fhir+json;q=0',
      'application/fhir+json;q=0, application/json;q=0.0',
      'application/fhir+json; fhirVersion=3.0',
    ];
    it.each(notAcceptable)('answers 406 with an OperationOutcome to Accept: %s', async (accept) => {
      for (const url of ['/fhir/metadata', '/fhir/Patient']) {
        const res = await fhir.get(url, { accept });
        expect(res.statusCode, `${url} ${res.body}`).toBe(406);
        expect(res.json().resourceType).toBe('OperationOutcome');
      }
    });

    const acceptable = [
      undefined,
      '*/*',
      'application/*',
      'application/json',
      'application/fhir+json',
      'application/fhir+json; fhirVersion=4.0',
      'application/fhir+xml;q=0.5, application/fhir+json',
    ];
    it.each(acceptable)('answers JSON to Accept: %s', async (accept) => {
      const res = await fhir.get('/fhir/Patient', accept === undefined ? {} : { accept });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
    });

    const xml = [
      'application/fhir+xml',
      'application/xml, text/html',
      'application/fhir+json; charset=utf-8; q=0.9, application/fhir+xml',
      'application/xml;q=1, */*;q=0.1',
      'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
    ];
    it.each(xml)('answers XML to Accept: %s', async (accept) => {
      const res = await fhir.get('/fhir/Patient', { accept });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toBe('application/fhir+xml; charset=utf-8');
      expect(res.body).toMatch(/^<\?xml version="1.0" encoding="UTF-8"\?><Bundle xmlns="http:\/\/hl7.org\/fhir">/);
    });

    it('lets _format win over Accept: json and xml; another _format is 406', async () => {
      const json = await fhir.get('/fhir/Patient?_format=json', { accept: 'application/fhir+xml' });
      expect(json.headers['content-type']).toMatch(/^application\/fhir\+json/);
      const xml = await fhir.get('/fhir/Patient?_format=xml', { accept: 'application/fhir+json' });
      expect(xml.headers['content-type']).toMatch(/^application\/fhir\+xml/);
      expect((await fhir.get('/fhir/Patient?_format=text/turtle')).statusCode).toBe(406);
    });

    it('leaves the token endpoint and the scribe API answering JSON', async () => {
      const templates = await fhir.get('/v1/ambient/api/templates', { accept: 'text/plain' });
      expect(templates.statusCode, templates.body).toBe(200);
      expect(templates.headers['content-type']).toMatch(/^application\/json/);
    });
  });

  describe('CapabilityStatement', () => {
    let statement: Record<string, any>;
    let rest: Record<string, any>;
    let patient: Record<string, any>;
    beforeAll(async () => {
      statement = (await fhir.get('/fhir/metadata')).json();
      rest = statement.rest[0];
      patient = rest.resource.find((r: { type: string }) => r.type === 'Patient');
    });

    it('lists searchInclude and searchRevInclude from the reference parameters', async () => {
      expect(patient.searchInclude).toEqual(expect.arrayContaining(['*', 'Patient:general-practitioner']));
      expect(patient.searchRevInclude).toEqual(
        expect.arrayContaining(['Observation:subject', 'Encounter:patient', 'Observation:patient']),
      );
      expect(patient.searchRevInclude).not.toContain('Observation:performer:Organization');
      // Each one works.
      const res = await fhir.get('/fhir/Patient?_include=Patient:general-practitioner&_revinclude=Observation:subject');
      expect(res.statusCode, res.body).toBe(200);
    });

    it('states patchFormat, the conditional flags, system search parameters and the reference policy', async () => {
      expect(statement.patchFormat).toEqual([
        'application/json-patch+json',
        'application/fhir+json',
        'application/fhir+xml',
      ]);
      expect(patient.conditionalCreate).toBe(true);
      const system = rest.searchParam.map((p: { name: string }) => p.name);
      expect(system).toEqual(
        expect.arrayContaining(['_id', '_lastUpdated', '_tag', '_profile', '_security', '_has', '_type']),
      );
      expect(system).not.toContain('_text');
      expect(patient.referencePolicy).toEqual(expect.arrayContaining(['literal', 'enforced', 'local']));
      // Each system parameter works at the system level.
      const res = await fhir.get(
        '/fhir?_type=Patient&_lastUpdated=gt2000-01-01&_tag=a|b&_profile=http://x&_security=a|b&_id=x&_has:Observation:subject:code=x',
      );
      expect(res.statusCode, res.body).toBe(200);
    });
  });

  describe('operations the server lacks', () => {
    const cases: [string, string, string][] = [
      ['GET', '/fhir/Patient/$everything', '$everything'],
      ['GET', '/fhir/Observation/123/$everything', '$everything'],
      ['GET', '/fhir/$reindex', '$reindex'],
      ['GET', '/fhir/Patient/$match', '$match'],
      ['POST', '/fhir/Patient/$lookup', '$lookup'],
      ['POST', '/fhir/$meta', '$meta'],
    ];
    it.each(cases)('answers %s %s with 400 not-supported naming it', async (method, url, name) => {
      const res = await fhir.request(
        method as 'GET' | 'POST',
        url,
        method === 'POST' ? { resourceType: 'Parameters' } : undefined,
      );
      expect(res.statusCode, res.body).toBe(400);
      const outcome = res.json();
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0].code).toBe('not-supported');
      expect(outcome.issue[0].diagnostics).toContain(name);
      expect(outcome.issue[0].details.coding[0].code).toBe('operation-not-supported');
    });

    it('answers an unsupported operation in a batch entry with not-supported', async () => {
      const res = await post(bundle('batch', [{ request: { method: 'GET', url: 'Patient/123/$everything' } }]));
      expect(res.statusCode, res.body).toBe(200);
      const [entry] = res.json().entry;
      expect(entry.response.status).toBe('400 Bad Request');
      expect(entry.response.outcome.issue[0].code).toBe('not-supported');
      expect(entry.response.outcome.issue[0].diagnostics).toContain('$everything');
    });

    it('keeps $validate working', async () => {
      const res = await fhir.post('/fhir/Patient/$validate', { resourceType: 'Patient' });
      expect(res.statusCode, res.body).toBe(200);
    });
  });
});
