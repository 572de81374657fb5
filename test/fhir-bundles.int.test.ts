// Batch and transaction Bundles (POST /fhir), on both databases.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

type Entry = { fullUrl?: string; resource?: Record<string, unknown>; request: Record<string, unknown> };
const bundle = (type: 'batch' | 'transaction', entry: Entry[]) => ({ resourceType: 'Bundle', type, entry });

describe.each(BACKENDS)('Bundles on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend, { AMBIENT_MAX_BUNDLE_ENTRIES: '50' });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const post = (body: unknown, url = '/fhir', headers: Record<string, string> = {}) => fhir.post(url, body, headers);
  const read = (reference: string) => fhir.get(`/fhir/${reference}`);

  describe('transaction', () => {
    it('creates, resolves urn:uuid references everywhere, and answers in entry order', async () => {
      const patientUrl = `urn:uuid:${randomUUID()}`;
      const practitionerUrl = `urn:oid:1.2.3.${Date.now()}`;
      const res = await post(
        bundle('transaction', [
          {
            fullUrl: `urn:uuid:${randomUUID()}`,
            resource: {
              resourceType: 'Encounter',
              status: 'finished',
              class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
              subject: { reference: patientUrl },
              participant: [{ individual: { reference: practitionerUrl } }],
              reasonReference: [{ reference: '#o1' }],
              contained: [
                {
                  resourceType: 'Observation',
                  id: 'o1',
                  status: 'final',
                  code: { text: 'x' },
                  subject: { reference: patientUrl },
                },
              ],
            },
            request: { method: 'POST', url: 'Encounter' },
          },
          {
            fullUrl: patientUrl,
            resource: { resourceType: 'Patient', name: [{ family: 'Tx' }] },
            request: { method: 'POST', url: 'Patient' },
          },
          {
            fullUrl: practitionerUrl,
            resource: { resourceType: 'Practitioner' },
            request: { method: 'POST', url: 'Practitioner' },
          },
        ]),
        '/fhir/',
      );
      const body = res.json();
      expect(res.statusCode, res.body).toBe(200);
      expect(body.type).toBe('transaction-response');
      expect(body.entry.map((e: any) => e.response.status)).toEqual(['201 Created', '201 Created', '201 Created']);
      const [encounterLoc, patientLoc, practitionerLoc] = body.entry.map((e: any) =>
        e.response.location.replace(/\/_history\/1$/, ''),
      );
      expect(encounterLoc).toMatch(/^Encounter\//);
      expect(body.entry[1].response.etag).toBe('W/"1"');
      const encounter = (await read(encounterLoc)).json();
      expect(encounter.subject.reference).toBe(patientLoc);
      expect(encounter.participant[0].individual.reference).toBe(practitionerLoc);
      expect(encounter.contained[0].subject.reference).toBe(patientLoc);
      expect((await read(patientLoc)).statusCode).toBe(200);
    });

    it('processes DELETE, POST, PUT, then GET, and lets PUT with a urn fullUrl be referenced', async () => {
      const doomed = (await post({ resourceType: 'Patient' }, '/fhir/Patient')).json().id;
      const fixedId = `tx-${randomUUID()}`;
      const res = await post(
        bundle('transaction', [
          { request: { method: 'GET', url: `Patient/${fixedId}` } },
          {
            fullUrl: 'urn:uuid:4b1b4c0e-0000-4000-8000-000000000001',
            resource: { resourceType: 'Patient', id: fixedId, gender: 'female' },
            request: { method: 'PUT', url: `Patient/${fixedId}` },
          },
          {
            resource: {
              resourceType: 'Observation',
              status: 'final',
              code: { text: 'y' },
              subject: { reference: 'urn:uuid:4b1b4c0e-0000-4000-8000-000000000001' },
            },
            request: { method: 'POST', url: 'Observation' },
          },
          { request: { method: 'DELETE', url: `Patient/${doomed}` } },
        ]),
      );
      expect(res.statusCode).toBe(200);
      const entries = res.json().entry;
      expect(entries.map((e: any) => e.response.status)).toEqual([
        '200 OK',
        '201 Created',
        '201 Created',
        '204 No Content',
      ]);
      expect(entries[0].resource.gender).toBe('female');
      const observation = (await read(entries[2].response.location)).json();
      expect(observation.subject.reference).toBe(`Patient/${fixedId}`);
      expect((await read(`Patient/${doomed}`)).statusCode).toBe(410);
    });

    it('fails as a whole, naming the entry, and stores nothing', async () => {
      const id = `atomic-${randomUUID()}`;
      const res = await post(
        bundle('transaction', [
          { resource: { resourceType: 'Patient', id }, request: { method: 'PUT', url: `Patient/${id}` } },
          {
            resource: {
              resourceType: 'Appointment',
              participant: [{ actor: { reference: `Patient/${id}` }, status: 'accepted' }],
            },
            request: { method: 'POST', url: 'Appointment' },
          },
        ]),
      );
      expect(res.statusCode).toBe(401);
      const outcome = res.json();
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0].diagnostics).toContain('Bundle.entry[1]');
      expect(outcome.issue.some((i: any) => i.expression?.includes('Appointment.status'))).toBe(true);
      expect((await read(`Patient/${id}`)).statusCode).toBe(404);
    });

    it('runs its GET entries inside the transaction: a read, a search and a history see what it wrote', async () => {
      const family = `Inside${randomUUID().replace(/-/g, '')}`;
      const id = `inside-${randomUUID()}`;
      const res = await post(
        bundle('transaction', [
          { request: { method: 'GET', url: `Patient?family=${family}&_total=accurate` } },
          { request: { method: 'GET', url: `Patient/${id}` } },
          { request: { method: 'GET', url: `Patient/${id}/_history` } },
          {
            fullUrl: 'urn:uuid:4b1b4c0e-0000-4000-8000-000000000002',
            resource: { resourceType: 'Patient', name: [{ family }] },
            request: { method: 'POST', url: 'Patient' },
          },
          {
            resource: { resourceType: 'Patient', id, name: [{ family }] },
            request: { method: 'PUT', url: `Patient/${id}` },
          },
          {
            resource: {
              resourceType: 'Observation',
              status: 'final',
              code: { text: 'inside' },
              subject: { reference: 'urn:uuid:4b1b4c0e-0000-4000-8000-000000000002' },
            },
            request: { method: 'POST', url: 'Observation' },
          },
          { request: { method: 'GET', url: `Observation?subject.family=${family}&_include=Observation:subject` } },
        ]),
      );
      expect(res.statusCode).toBe(200);
      const entries = res.json().entry;
      expect(entries.map((e: any) => e.response.status)).toEqual([
        '200 OK',
        '200 OK',
        '200 OK',
        '201 Created',
        '201 Created',
        '201 Created',
        '200 OK',
      ]);
      const created = entries[3].response.location.split('/')[1];
      const [search, read, history, , , observation, chained] = entries.map((e: any) => e.resource);
      expect(search.total).toBe(2);
      expect(search.entry.map((e: any) => e.resource.id).sort()).toEqual([created, id].sort());
      expect(read.id).toBe(id);
      expect(history.entry.map((e: any) => e.resource.meta.versionId)).toEqual(['1']);
      expect(chained.entry.map((e: any) => `${e.search.mode} ${e.resource.resourceType}/${e.resource.id}`)).toEqual([
        `match Observation/${observation.id}`,
        `include Patient/${created}`,
      ]);
    });

    it('fails as a whole on a failing GET entry, naming it, and stores nothing', async () => {
      const id = `get-fails-${randomUUID()}`;
      const res = await post(
        bundle('transaction', [
          { resource: { resourceType: 'Patient', id }, request: { method: 'PUT', url: `Patient/${id}` } },
          { resource: { resourceType: 'Patient', gender: 'other' }, request: { method: 'POST', url: 'Patient' } },
          { request: { method: 'GET', url: `Patient/never-${randomUUID()}` } },
        ]),
      );
      expect(res.statusCode).toBe(404);
      const outcome = res.json();
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0].diagnostics).toContain('Bundle.entry[2] (GET Patient/never-');
      expect((await read(`Patient/${id}`)).statusCode).toBe(404);
    });

    it('fails as a whole on a GET search entry the search refuses (400), storing nothing', async () => {
      const id = `search-fails-${randomUUID()}`;
      const res = await post(
        bundle('transaction', [
          { resource: { resourceType: 'Patient', id }, request: { method: 'PUT', url: `Patient/${id}` } },
          { request: { method: 'GET', url: 'Patient?_sort=no-such-parameter' } },
        ]),
      );
      expect(res.statusCode).toBe(400);
      expect(res.json().issue[0].diagnostics).toContain('Bundle.entry[1]');
      expect((await read(`Patient/${id}`)).statusCode).toBe(404);
    });

    it('resolves references afresh when it is run again after a conflict (concurrent update-as-creates)', async () => {
      // Every Bundle creates the same new Group id: on PostgreSQL all but one hit its unique key and are
      // run again by the store. Each run assigns new ids; the references must follow the last run.
      const groupId = `race-${randomUUID()}`;
      const transaction = () =>
        bundle('transaction', [
          {
            fullUrl: 'urn:uuid:4b1b4c0e-0000-4000-8000-000000000003',
            resource: { resourceType: 'Patient', gender: 'unknown' },
            request: { method: 'POST', url: 'Patient' },
          },
          {
            resource: {
              resourceType: 'Observation',
              status: 'final',
              code: { text: 'race' },
              subject: { reference: 'urn:uuid:4b1b4c0e-0000-4000-8000-000000000003' },
            },
            request: { method: 'POST', url: 'Observation' },
          },
          {
            resource: { resourceType: 'Group', id: groupId, type: 'person', actual: true },
            request: { method: 'PUT', url: `Group/${groupId}` },
          },
        ]);
      const results = await Promise.all(Array.from({ length: 8 }, () => post(transaction())));
      for (const res of results) {
        expect(res.statusCode).toBe(200);
        const [patient, observation] = res.json().entry;
        const stored = (await read(observation.response.location)).json();
        const patientRef = patient.response.location.split('/_history')[0];
        expect(stored.subject.reference).toBe(patientRef);
        expect((await read(patientRef)).statusCode).toBe(200);
      }
    });

    it('refuses a stale ifMatch with 412 and rolls back the rest', async () => {
      const created = (await post({ resourceType: 'Patient', gender: 'male' }, '/fhir/Patient')).json();
      const other = `rb-${randomUUID()}`;
      const res = await post(
        bundle('transaction', [
          { resource: { resourceType: 'Patient', id: other }, request: { method: 'PUT', url: `Patient/${other}` } },
          {
            resource: { ...created, gender: 'female' },
            request: { method: 'PUT', url: `Patient/${created.id}`, ifMatch: 'W/"7"' },
          },
        ]),
      );
      expect(res.statusCode).toBe(412);
      expect((await read(`Patient/${other}`)).statusCode).toBe(404);
      expect((await read(`Patient/${created.id}`)).json().gender).toBe('male');
    });

    it('applies a JSON Patch sent as a Binary and a FHIRPath Patch', async () => {
      const created = (await post({ resourceType: 'Patient', gender: 'male' }, '/fhir/Patient')).json();
      const jsonPatch = Buffer.from(JSON.stringify([{ op: 'replace', path: '/gender', value: 'female' }])).toString(
        'base64',
      );
      const res = await post(
        bundle('transaction', [
          {
            resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: jsonPatch },
            request: { method: 'PATCH', url: `Patient/${created.id}` },
          },
        ]),
      );
      expect(res.statusCode).toBe(200);
      expect((await read(`Patient/${created.id}`)).json().gender).toBe('female');
    });

    it('answers 400 for a malformed Bundle or entry, and 413 above the entry limit', async () => {
      expect((await post({ resourceType: 'Bundle', type: 'collection' })).statusCode).toBe(400);
      expect((await post({ resourceType: 'Patient' })).statusCode).toBe(400);
      const badEntry = await post(bundle('transaction', [{ request: { method: 'POST', url: 'Nope' } }]));
      expect(badEntry.statusCode).toBe(400);
      expect(badEntry.json().issue[0].diagnostics).toContain('Bundle.entry[0]');
      const many = Array.from({ length: 51 }, () => ({
        resource: { resourceType: 'Basic', code: { text: 'x' } },
        request: { method: 'POST', url: 'Basic' },
      }));
      const tooMany = await post(bundle('transaction', many));
      expect(tooMany.statusCode).toBe(413);
      expect(tooMany.json().issue[0].diagnostics).toContain('at most 50');
    });

    it('checks scopes per entry', async () => {
      const readOnly = await t.client('system/*.rs');
      const res = await readOnly.post(
        '/fhir',
        bundle('transaction', [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }]),
      );
      expect(res.statusCode).toBe(403);
      expect(res.json().issue[0].diagnostics).toContain('Bundle.entry[0]');
    });
  });

  describe('batch', () => {
    it("honours ifNoneExist on POST entries: the second batch finds the first one's resource (200)", async () => {
      const value = randomUUID();
      const entry: Entry = {
        resource: { resourceType: 'Patient', identifier: [{ system: 'http://example.org/mrn', value }] },
        request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=http://example.org/mrn|${value}` },
      };
      const first = (await post(bundle('batch', [entry]))).json().entry[0].response;
      const second = (await post(bundle('batch', [entry]))).json().entry[0].response;
      expect(first.status).toBe('201 Created');
      expect(second.status).toBe('200 OK');
      expect(second.location).toBe(first.location);
      const found = await fhir.get(`/fhir/Patient?identifier=${encodeURIComponent(`http://example.org/mrn|${value}`)}`);
      expect(found.json().entry).toHaveLength(1);
    });

    it('processes entries independently, each with its own response or OperationOutcome', async () => {
      const res = await post(
        bundle('batch', [
          { resource: { resourceType: 'Patient', gender: 'other' }, request: { method: 'POST', url: 'Patient' } },
          {
            resource: { resourceType: 'Patient', gender: 'invalid-code' },
            request: { method: 'POST', url: 'Patient' },
          },
          { request: { method: 'GET', url: 'Patient/does-not-exist' } },
          { request: { method: 'GET', url: 'metadata' } },
        ]),
      );
      expect(res.statusCode).toBe(200);
      const entries = res.json().entry;
      expect(res.json().type).toBe('batch-response');
      expect(entries[0].response.status).toBe('201 Created');
      expect(entries[0].resource.gender).toBe('other');
      expect(entries[1].response.status).toBe('401 Unauthorized');
      expect(entries[1].response.outcome.issue.some((i: any) => i.expression?.includes('Patient.gender'))).toBe(true);
      expect(entries[2].response.status).toBe('404 Not Found');
      expect(entries[3].response.status).toBe('200 OK');
      expect(entries[3].resource.resourceType).toBe('CapabilityStatement');
      expect((await read(entries[0].response.location)).statusCode).toBe(200);
    });

    it('leaves resources out of the response with Prefer: return=minimal', async () => {
      const res = await post(
        bundle('batch', [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }]),
        '/fhir',
        {
          prefer: 'return=minimal',
        },
      );
      expect(res.json().entry[0].resource).toBeUndefined();
      expect(res.json().entry[0].response.location).toMatch(/^Patient\/.+\/_history\/1$/);
    });
  });
});
