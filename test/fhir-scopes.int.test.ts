// Scopes beyond the plain interactions: search criteria of conditional writes obey the caller's search
// scopes like a search, and a write answers with the resource only to a caller that may read it
// (SMART on FHIR v2), on both databases.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const HIV = '86406008';

describe.each(BACKENDS)('scopes of conditional writes and write answers on %s', (backend) => {
  let t: TestApp;
  let admin: FhirClient;
  const as = (scopes: string) => t.client(scopes);
  beforeAll(async () => {
    t = await startTestApp(backend);
    admin = await as('system/*.cruds');
  });
  afterAll(async () => t?.close());

  /** A patient with (or without) an HIV diagnosis, stored by the administrator. */
  const patient = async (diagnosed: boolean) => {
    const id = (await admin.post('/fhir/Patient', { resourceType: 'Patient', gender: 'female' })).json().id as string;
    if (diagnosed) {
      const condition = await admin.post('/fhir/Condition', {
        resourceType: 'Condition',
        subject: { reference: `Patient/${id}` },
        code: { coding: [{ system: 'http://snomed.info/sct', code: HIV }] },
      });
      expect(condition.statusCode).toBe(201);
    }
    return id;
  };
  const hiv = (id: string) => `_id=${id}&_has:Condition:subject:code=${HIV}`;

  describe('criteria obey the search scopes (a _has or chain through an unsearchable type is 403)', () => {
    it('If-None-Exist with _has through Condition: 403 whether or not the patient has the diagnosis', async () => {
      const patientOnly = await as('system/Patient.cruds');
      for (const diagnosed of [true, false]) {
        const id = await patient(diagnosed);
        const res = await patientOnly.post('/fhir/Patient', { resourceType: 'Patient' }, { 'if-none-exist': hiv(id) });
        expect(res.statusCode).toBe(403);
        expect(res.json().issue[0].diagnostics).toContain('Condition');
      }
      // A caller that may search Condition gets its answer.
      const both = await as('system/Patient.cruds system/Condition.s');
      const id = await patient(true);
      const res = await both.post('/fhir/Patient', { resourceType: 'Patient' }, { 'if-none-exist': hiv(id) });
      expect(res.statusCode).toBe(200);
      expect(res.json().id).toBe(id);
    });

    it('conditional delete with _has through Condition: 403, nothing deleted', async () => {
      const patientOnly = await as('system/Patient.cruds');
      const id = await patient(true);
      const res = await patientOnly.delete(`/fhir/Patient?${hiv(id)}`);
      expect(res.statusCode).toBe(403);
      expect((await admin.get(`/fhir/Patient/${id}`)).statusCode).toBe(200);
    });

    it('conditional update with _has or a chain through an unsearchable type: 403, nothing written', async () => {
      const patientOnly = await as('system/Patient.cruds');
      const id = await patient(true);
      const body = { resourceType: 'Patient', id, gender: 'male' };
      expect((await patientOnly.put(`/fhir/Patient?${hiv(id)}`, body)).statusCode).toBe(403);
      const chained = await patientOnly.put(`/fhir/Patient?_id=${id}&general-practitioner:Practitioner.name=x`, body);
      expect(chained.statusCode).toBe(403);
      expect((await admin.get(`/fhir/Patient/${id}`)).json().meta.versionId).toBe('1');
    });

    it('transaction ifNoneExist and conditional references with _has through Condition: 403, nothing stored', async () => {
      const patientOnly = await as('system/Patient.cruds');
      const id = await patient(true);
      const marker = randomUUID();
      const transaction = (entry: unknown[]) =>
        patientOnly.post('/fhir', { resourceType: 'Bundle', type: 'transaction', entry });
      const viaIfNoneExist = await transaction([
        {
          resource: { resourceType: 'Patient', identifier: [{ value: marker }] },
          request: { method: 'POST', url: 'Patient', ifNoneExist: hiv(id) },
        },
      ]);
      expect(viaIfNoneExist.statusCode).toBe(403);
      const viaReference = await transaction([
        {
          resource: {
            resourceType: 'Patient',
            identifier: [{ value: marker }],
            link: [{ other: { reference: `Patient?${hiv(id)}` }, type: 'seealso' }],
          },
          request: { method: 'POST', url: 'Patient' },
        },
      ]);
      expect(viaReference.statusCode).toBe(403);
      expect((await admin.get(`/fhir/Patient?identifier=${marker}`)).json().entry ?? []).toHaveLength(0);
    });

    it('batch ifNoneExist with _has through Condition: that entry is 403', async () => {
      const patientOnly = await as('system/Patient.cruds');
      const id = await patient(true);
      const res = await patientOnly.post('/fhir', {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient', ifNoneExist: hiv(id) } },
        ],
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().entry[0].response.status).toMatch(/^403/);
    });
  });

  describe('writes without r answer no resource; update-as-create needs c; a patch that reads needs r', () => {
    it('u alone: a JSON Patch test, copy or move and a FHIRPath Patch are 403 and answer nothing', async () => {
      const updateOnly = await as('system/Patient.u');
      const id = await patient(false);
      const patch = (contentType: string, payload: string) =>
        updateOnly.patch(`/fhir/Patient/${id}`, payload, { 'content-type': contentType });
      for (const [contentType, payload] of [
        ['application/json-patch+json', '[{"op":"test","path":"/gender","value":"female"}]'],
        ['application/json-patch+json', '[{"op":"copy","from":"/gender","path":"/language"}]'],
        ['application/json-patch+json', '[{"op":"move","from":"/gender","path":"/language"}]'],
        [
          'application/fhir+json',
          JSON.stringify({
            resourceType: 'Parameters',
            parameter: [
              {
                name: 'operation',
                part: [
                  { name: 'type', valueCode: 'delete' },
                  { name: 'path', valueString: "Patient.where(gender='female').birthDate" },
                ],
              },
            ],
          }),
        ],
      ]) {
        const res = await patch(contentType, payload);
        expect(res.statusCode).toBe(403);
        expect(res.body).not.toContain('female');
      }
      expect((await admin.get(`/fhir/Patient/${id}`)).json().meta.versionId).toBe('1');
    });

    it('u alone: a JSON Patch that only writes (or an empty one) is applied and answers without the resource', async () => {
      const updateOnly = await as('system/Patient.u');
      const id = await patient(false);
      for (const [payload, version] of [
        ['[]', '2'],
        ['[{"op":"add","path":"/active","value":true}]', '3'],
      ] as const) {
        const res = await updateOnly.patch(`/fhir/Patient/${id}`, payload, {
          'content-type': 'application/json-patch+json',
          prefer: 'return=representation',
        });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.body).toBe('');
        expect(res.headers.etag).toBe(`W/"${version}"`);
      }
      const stored = (await admin.get(`/fhir/Patient/${id}`)).json();
      expect(stored.active).toBe(true);
      expect(stored.gender).toBe('female');
    });

    it('u alone: PUT to a new id is 403 and stores nothing; PUT to an existing one answers without the resource', async () => {
      const updateOnly = await as('system/Patient.u');
      const fresh = `new-${randomUUID()}`;
      const refused = await updateOnly.put(`/fhir/Patient/${fresh}`, { resourceType: 'Patient', id: fresh });
      expect(refused.statusCode).toBe(403);
      expect((await admin.get(`/fhir/Patient/${fresh}`)).statusCode).toBe(404);

      const id = await patient(false);
      const updated = await updateOnly.put(
        `/fhir/Patient/${id}`,
        { resourceType: 'Patient', id, gender: 'male' },
        { prefer: 'return=representation' },
      );
      expect(updated.statusCode).toBe(200);
      expect(updated.body).toBe('');
      expect(updated.headers.etag).toBe('W/"2"');
      expect(updated.headers.location).toContain(`/Patient/${id}/_history/2`);

      // Re-creating a deleted resource is a create too.
      await admin.delete(`/fhir/Patient/${id}`);
      expect((await updateOnly.put(`/fhir/Patient/${id}`, { resourceType: 'Patient', id })).statusCode).toBe(403);
      expect((await admin.get(`/fhir/Patient/${id}`)).statusCode).toBe(410);

      // With c as well, update-as-create works (and still answers no resource without r).
      const createUpdate = await as('system/Patient.cu');
      const created = await createUpdate.put(`/fhir/Patient/${fresh}`, { resourceType: 'Patient', id: fresh });
      expect(created.statusCode).toBe(201);
      expect(created.body).toBe('');
    });

    it('c alone: create answers Location and ETag but no resource; a conditional create that matches neither', async () => {
      const createOnly = await as('system/Patient.c');
      const created = await createOnly.post('/fhir/Patient', { resourceType: 'Patient', gender: 'other' });
      expect(created.statusCode).toBe(201);
      expect(created.body).toBe('');
      expect(created.headers.location).toMatch(/\/fhir\/Patient\/[^/]+\/_history\/1$/);

      const createSearch = await as('system/Patient.cs');
      const id = await patient(false);
      const matched = await createSearch.post(
        '/fhir/Patient',
        { resourceType: 'Patient' },
        { 'if-none-exist': `_id=${id}`, prefer: 'return=representation' },
      );
      expect(matched.statusCode).toBe(200);
      expect(matched.body).toBe('');
    });

    it('in a transaction: entries written without r carry no resource; update-as-create without c fails it', async () => {
      const createUpdate = await as('system/Patient.cus');
      const id = await patient(false);
      const res = await createUpdate.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: { resourceType: 'Patient', gender: 'male' }, request: { method: 'POST', url: 'Patient' } },
          {
            resource: { resourceType: 'Patient', id, gender: 'male' },
            request: { method: 'PUT', url: `Patient/${id}` },
          },
          {
            resource: { resourceType: 'Patient' },
            request: { method: 'POST', url: 'Patient', ifNoneExist: `_id=${id}` },
          },
        ],
      });
      expect(res.statusCode).toBe(200);
      const entries = res.json().entry as { resource?: unknown; response: { status: string; location: string } }[];
      expect(entries.map((e) => e.response.status)).toEqual(['201 Created', '200 OK', '200 OK']);
      for (const entry of entries) {
        expect(entry.resource).toBeUndefined();
        expect(entry.response.location).toMatch(/^Patient\//);
      }

      const updateOnly = await as('system/Patient.u');
      const fresh = `new-${randomUUID()}`;
      const refused = await updateOnly.post('/fhir', {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            resource: { resourceType: 'Patient', id: fresh },
            request: { method: 'PUT', url: `Patient/${fresh}` },
          },
        ],
      });
      expect(refused.statusCode).toBe(403);
      expect((await admin.get(`/fhir/Patient/${fresh}`)).statusCode).toBe(404);
    });
  });
});
