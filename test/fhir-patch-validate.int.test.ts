// PATCH (JSON Patch, FHIRPath Patch) and $validate through HTTP, on both databases.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import type { FhirClient } from './support/fhir-client.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

describe.each(BACKENDS)('PATCH and $validate on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const createPatient = async () =>
    (await fhir.create({ resourceType: 'Patient', gender: 'male', name: [{ family: 'Patch', given: ['A'] }] })).json();

  const patch = (id: string, body: unknown, contentType: string, headers: Record<string, string> = {}) =>
    fhir.patch(`/fhir/Patient/${id}`, body, { 'content-type': contentType, ...headers });

  it('applies a JSON Patch as a new version, honouring If-Match', async () => {
    const { id } = await createPatient();
    const res = await patch(
      id,
      [
        { op: 'replace', path: '/gender', value: 'female' },
        { op: 'add', path: '/name/0/given/-', value: 'B' },
      ],
      'application/json-patch+json',
      {
        'if-match': 'W/"1"',
      },
    );
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      gender: 'female',
      name: [{ family: 'Patch', given: ['A', 'B'] }],
      meta: { versionId: '2' },
    });
    expect(res.headers.etag).toBe('W/"2"');
    const stale = await patch(id, [{ op: 'remove', path: '/gender' }], 'application/json-patch+json', {
      'if-match': 'W/"1"',
    });
    expect(stale.statusCode).toBe(412);
    const read = await fhir.get(`/fhir/Patient/${id}`);
    expect(read.json().gender).toBe('female');
  });

  it('applies a FHIRPath Patch', async () => {
    const { id } = await createPatient();
    const res = await patch(
      id,
      {
        resourceType: 'Parameters',
        parameter: [
          {
            name: 'operation',
            part: [
              { name: 'type', valueCode: 'add' },
              { name: 'path', valueString: 'Patient' },
              { name: 'name', valueString: 'birthDate' },
              { name: 'value', valueDate: '1980-05-06' },
            ],
          },
        ],
      },
      'application/fhir+json',
    );
    expect(res.statusCode).toBe(200);
    expect(res.json().birthDate).toBe('1980-05-06');
  });

  it('validates the patched resource like an update (401 by default) and stores nothing', async () => {
    const { id } = await createPatient();
    const res = await patch(id, [{ op: 'replace', path: '/gender', value: 'robot' }], 'application/json-patch+json');
    expect(res.statusCode).toBe(401);
    expect(res.json().issue.some((i: { expression?: string[] }) => i.expression?.includes('Patient.gender'))).toBe(
      true,
    );
    const read = await fhir.get(`/fhir/Patient/${id}`);
    expect(read.json().meta.versionId).toBe('1');
  });

  it('answers 422 for a failing patch, 400 for a malformed one, 415 for another media type, 404/410', async () => {
    const { id } = await createPatient();
    const failing = await patch(id, [{ op: 'test', path: '/gender', value: 'female' }], 'application/json-patch+json');
    expect(failing.statusCode).toBe(422);
    expect(failing.json().resourceType).toBe('OperationOutcome');
    const changesId = await patch(id, [{ op: 'replace', path: '/id', value: 'other' }], 'application/json-patch+json');
    expect(changesId.statusCode).toBe(422);
    expect((await patch(id, { op: 'remove' }, 'application/json-patch+json')).statusCode).toBe(400);
    const xmlPatch = await fhir.patch(`/fhir/Patient/${id}`, '<diff/>', {
      'content-type': 'application/xml-patch+xml',
    });
    expect(xmlPatch.statusCode).toBe(415);
    expect((await patch('nope', [], 'application/json-patch+json')).statusCode).toBe(404);
    await fhir.delete(`/fhir/Patient/${id}`);
    expect((await patch(id, [], 'application/json-patch+json')).statusCode).toBe(410);
  });

  it('never loses one of many concurrent patches', async () => {
    const { id } = await createPatient();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        patch(id, [{ op: 'add', path: '/name/0/given/-', value: `G${i}` }], 'application/json-patch+json'),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual(Array(8).fill(200));
    const read = await fhir.get(`/fhir/Patient/${id}`);
    expect(read.json().name[0].given).toHaveLength(9);
    expect(read.json().meta.versionId).toBe('9');
  });

  describe('$validate', () => {
    it('answers an OperationOutcome listing every issue and stores nothing', async () => {
      const before = (await fhir.get('/fhir/Appointment/_history?_count=1')).json();
      const res = await fhir.post('/fhir/Appointment/$validate', { resourceType: 'Appointment', participant: [] });
      expect(res.statusCode).toBe(200);
      const expressions = res.json().issue.flatMap((i: { expression?: string[] }) => i.expression ?? []);
      expect(expressions).toEqual(expect.arrayContaining(['Appointment.status']));
      const after = (await fhir.get('/fhir/Appointment/_history?_count=1')).json();
      expect(after.entry?.[0]?.fullUrl).toBe(before.entry?.[0]?.fullUrl);
    });

    it('says all is well for a valid resource, also inside Parameters, and on an instance', async () => {
      const valid = { resourceType: 'Patient', gender: 'female' };
      const direct = await fhir.post('/fhir/Patient/$validate', valid);
      expect(direct.json().issue).toEqual([expect.objectContaining({ severity: 'information' })]);
      const wrapped = await fhir.post('/fhir/Patient/$validate', {
        resourceType: 'Parameters',
        parameter: [{ name: 'resource', resource: valid }],
      });
      expect(wrapped.json().issue[0].severity).toBe('information');
      const { id } = await createPatient();
      const instance = await fhir.post(`/fhir/Patient/${id}/$validate`, { ...valid, id });
      expect(instance.json().issue[0].severity).toBe('information');
      const deleteMode = await fhir.post(`/fhir/Patient/missing-${Date.now()}/$validate`, {
        resourceType: 'Parameters',
        parameter: [{ name: 'mode', valueCode: 'delete' }],
      });
      expect(deleteMode.json().issue[0].code).toBe('not-found');
    });

    it('refuses a resource of another type with 400', async () => {
      expect((await fhir.post('/fhir/Patient/$validate', { resourceType: 'Observation' })).statusCode).toBe(400);
    });
  });
});
